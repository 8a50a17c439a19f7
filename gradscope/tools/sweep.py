"""`gradscope sweep`: one scalar input moved over a range, with f, the autograd derivative and
the finite-difference derivative (the engine's central difference) at every point; jumps and
vanishing stretches are picked out for the plot (render/graph.py)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import torch

from gradscope._version import __version__
from gradscope.engines.fd.policy import scalar_step
from gradscope.engines.fd.stencil import central
from gradscope.errors import UsageError
from gradscope.options import Request
from gradscope.report import build, kinds
from gradscope.runner import prepare, seeded
from gradscope.targets import resolve
from gradscope.usercode import contained

MAX_POINTS = 5000


@dataclass(frozen=True)
class SweepReport:
    target: str
    var: str
    x: list[float]
    f: list[float]
    autograd: list[float]
    finite_difference: list[float]
    fixed: dict[str, Any]
    eps: float  # the finite-difference step used (absolute, or relative when --eps was given)
    jumps: list[float] = field(default_factory=list)  # x where the FD derivative spikes
    vanishing: int = 0  # points where autograd is 0 but f is not locally constant at scale
    schema: str = kinds.SWEEP
    version: str = __version__

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        return {"schema": data.pop("schema"), "version": data.pop("version"), **data}


@contained("sweep")
def sweep(request: Request, var: str, lo: float, hi: float, points: int) -> SweepReport:
    """The function and both derivatives along one input (module doc)."""
    with seeded(request.options.seed):
        return _sweep(request, var, lo, hi, points)


def _sweep(request: Request, var: str, lo: float, hi: float, points: int) -> SweepReport:
    """Move `var` (a scalar input) over [lo, hi]; everything else stays fixed. The function
    plotted is vᵀf with v the upstream (ones by default), so any output shape works."""
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise UsageError(f"--range {lo},{hi}: needs two finite numbers LO < HI")
    if not 2 <= points <= MAX_POINTS:
        raise UsageError(f"--points must be between 2 and {MAX_POINTS}, got {points}")
    options = request.options
    if var in options.at:
        raise UsageError(f"--var {var} is swept over --range; do not also give it with --at")
    target = resolve(request.target, args=options.arg, init=options.init, base=request.base)
    if var not in target.names:
        raise UsageError(f"--var {var} is not an input of the target; inputs are: "
                         f"{', '.join(target.names)}")
    # every input a scalar unless shaped; the swept one a scalar starting at 0
    given = {*options.at, var}
    shapes = {**{n: () for n in target.names if n not in given}, **options.shape}
    swept = replace(request, options=options.updated(shape=shapes,
                                                     at={**options.at, var: "0"}))
    prepared = prepare(swept)
    target, bound = prepared.target, prepared.bound  # converted and switched as asked
    cast = bound.cast
    dtype, device = cast[var].dtype, cast[var].device
    xs = torch.linspace(lo, hi, points, dtype=torch.float64)
    # Half the grid spacing by default: every jump inside the range falls into exactly one
    # stencil and shows as a spike of height jump/spacing; --eps asks for a relative step.
    spacing = (hi - lo) / (points - 1)

    def phi(x: torch.Tensor) -> torch.Tensor:
        out = target.forward({**cast, var: x.to(dtype)})
        return (bound.upstream.tensor_for(out) * out).sum()

    def at(x: float) -> torch.Tensor:
        with torch.no_grad():
            return phi(torch.tensor(x, dtype=torch.float64, device=device))

    f_vals, ag_vals, fd_vals = [], [], []
    for x in xs.tolist():
        point = torch.tensor(x, dtype=torch.float64, device=device, requires_grad=True)
        with torch.enable_grad():
            value = phi(point)
            (g,) = torch.autograd.grad(value, point, allow_unused=True) if value.requires_grad \
                else (None,)
        h = scalar_step(x, options.eps) if options.eps else spacing / 2
        f_vals.append(float(value.detach()))
        ag_vals.append(float(g) if g is not None else 0.0)
        fd_vals.append(central(at, x, h))
    jumps, vanishing = _features(xs.tolist(), f_vals, ag_vals, fd_vals)
    return SweepReport(target.text, var, xs.tolist(), f_vals, ag_vals, fd_vals,
                       {n: build.plain(t) for n, t in cast.items() if n != var},
                       options.eps or spacing / 2, jumps, vanishing)


def _features(xs: list[float], fs: list[float], ags: list[float], fds: list[float]
              ) -> tuple[list[float], int]:
    """Where the derivative jumps, and how many points autograd misses f's movement at."""
    fd = torch.tensor(fds, dtype=torch.float64)
    ag = torch.tensor(ags, dtype=torch.float64)
    finite = torch.isfinite(fd)
    typical = float(fd[finite].abs().median()) if bool(finite.any()) else 0.0
    scale = max(typical, 1.0)
    # A jump inside one stencil makes the difference quotient jump/step: far from autograd's
    # value and from the typical slope. A kink only averages two slopes and is not a spike.
    spike = (~finite) | ((fd - ag).abs() > 10 * scale)
    jumps = [x for x, s in zip(xs, spike.tolist(), strict=True) if s]
    # Autograd "misses" f when integrating its derivative recovers little of how much f moves
    # (round: f climbs 4 steps, the derivative integrates to 0). A flat stretch that f really
    # has (abs(x) + clamp(x, -1, 1) on [-1, 0]) is not vanishing.
    f = torch.tensor(fs, dtype=torch.float64)
    x = torch.tensor(xs, dtype=torch.float64)
    usable = torch.isfinite(f) & torch.isfinite(ag)
    variation = float(f[usable].diff().abs().sum()) if int(usable.sum()) > 1 else 0.0
    covered = float((ag[usable].abs()[1:] * x[usable].diff()).sum()) if int(usable.sum()) > 1 \
        else 0.0
    misses = variation > 0 and covered < 0.5 * variation
    vanishing = int(((ag == 0) & ~spike).sum()) if misses else 0
    return jumps, vanishing
