"""`gradscope sweep`: one scalar input moved over a range, with f, the autograd derivative and
the finite-difference derivative (the engine's central difference) at every point; jumps and
vanishing stretches are picked out for the plot (render/graph.py)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
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
    # where autograd and finite differences part (beyond the difference's own error estimate),
    # as stretches of the grid: from, to, points, typical autograd and FD values, most apart
    parted: list[dict[str, float]] = field(default_factory=list)
    # where each derivative is zero, as [from, to] stretches of the grid
    zero: dict[str, list[list[float]]] = field(default_factory=dict)
    # the largest estimated error of the difference quotient away from jumps, and the largest
    # |derivative| it is relative to: a coarse grid over a fast function makes it large
    fd_error: float = 0.0
    scale: float = 0.0
    drawn: list[str] = field(default_factory=list)  # the held inputs gradscope drew (no --at)
    schema: str = kinds.SWEEP
    version: str = __version__

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        return {"schema": data.pop("schema"), "version": data.pop("version"), **data}

    def plot(self) -> Any:
        """The three panels and the sweep's sentences as a Picture (notebook display,
        `.save("sweep.svg")`, or `.png` with matplotlib)."""
        from gradscope.render import sweep_picture

        return sweep_picture(self)

    def save(self, path: str | Path) -> Path:
        """Write the picture (.svg, or .png with matplotlib) or the data (.json)."""
        if Path(path).suffix.lower() == ".json":
            from gradscope.render.json import dumps

            Path(path).write_text(dumps(self) + "\n", encoding="utf-8")
            return Path(path)
        return self.plot().save(path)

    def _repr_svg_(self) -> str:
        """The picture where only SVG is shown (Jupyter prefers `_repr_html_`)."""
        return self.plot().svg

    def _repr_html_(self) -> str:
        """A notebook shows the picture, scaled to its cell."""
        return self.plot()._repr_html_()


@contained("sweep")
def sweep(request: Request, var: str, lo: float, hi: float, points: int,
          api: bool = False) -> SweepReport:
    """The function and both derivatives along one input (module doc); `api`: messages name
    Python's keywords (var=, range=) rather than the CLI's flags."""
    with seeded(request.options.seed):
        return _sweep(request, var, lo, hi, points, api)


# how each of the sweep's own options is named in messages: (the CLI's, Python's)
_NAMES = {"var": ("--var ", "var="), "range": ("--range ", "range="),
          "points": ("--points", "points"), "at": ("--at", "at=")}


def _sweep(request: Request, var: str, lo: float, hi: float, points: int,
           api: bool = False) -> SweepReport:
    """Move `var` (a scalar input) over [lo, hi]; everything else stays fixed. The function
    plotted is vᵀf with v the upstream (ones by default), so any output shape works."""
    options = request.options
    prepared = prepare(_swept(request, var, lo, hi, points, api))
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

    f_vals, ag_vals, fd_vals, half_vals = [], [], [], []
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
        half_vals.append(central(at, x, h / 2))  # (the difference's own error, see _apart)
    jumps, vanishing = _features(xs.tolist(), f_vals, ag_vals, fd_vals)
    spikes = set(jumps)
    apart = _apart(ag_vals, fd_vals, half_vals)
    return SweepReport(target.text, var, xs.tolist(), f_vals, ag_vals, fd_vals,
                       {n: build.plain(t) for n, t in cast.items() if n != var},
                       options.eps or spacing / 2, jumps, vanishing,
                       _parted(xs.tolist(), ag_vals, fd_vals, apart, spikes),
                       _zeros(xs.tolist(), ag_vals, fd_vals, spikes),
                       *_resolution(xs.tolist(), ag_vals, fd_vals, half_vals, spikes),
                       [n for n in cast if n != var and n not in options.at])


def _swept(request: Request, var: str, lo: float, hi: float, points: int, api: bool
           ) -> Request:
    """The request checked (range, points, var) and reshaped for the sweep: every input a
    scalar unless shaped, the swept one a scalar starting at 0."""
    said = {k: v[api] for k, v in _NAMES.items()}
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise UsageError(f"{said['range']}{lo},{hi}: needs two finite numbers LO < HI")
    if not 2 <= points <= MAX_POINTS:
        raise UsageError(f"{said['points']} must be between 2 and {MAX_POINTS}, got {points}")
    options = request.options
    if var in options.at:
        raise UsageError(f"{said['var']}{var} is swept over its range; do not also give it "
                         f"with {said['at']}")
    target = resolve(request.target, args=options.arg, init=options.init, base=request.base,
                     imports=options.imports)
    if var not in target.names:
        raise UsageError(f"{said['var']}{var} is not an input of the target; inputs are: "
                         f"{', '.join(target.names)}")
    given = {*options.at, var}
    shapes = {**{n: () for n in target.names if n not in given}, **options.shape}
    return replace(request, options=options.updated(shape=shapes,
                                                    at={**options.at, var: "0"}))


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


# A difference quotient's error is estimated by halving its step (Richardson: D(h) − D(h/2) is
# ¾ of D(h)'s h² error); autograd and it part where they differ by more than that, with a
# floor for round-off relative to the derivative's scale.
ERROR_FACTOR = 4.0
RELATIVE = 1e-3


def _apart(ags: list[float], fds: list[float], halves: list[float]) -> list[bool]:
    """Per point: autograd and the difference quotient differ beyond the quotient's error."""
    ag, fd, half = (torch.tensor(v, dtype=torch.float64) for v in (ags, fds, halves))
    finite = torch.isfinite(ag) & torch.isfinite(fd)
    scale = max(float(torch.cat([ag[finite], fd[finite]]).abs().max()) if bool(finite.any())
                else 0.0, 1e-300)
    error = ERROR_FACTOR * (fd - half).abs().nan_to_num(nan=0.0, posinf=0.0)
    bound = error + RELATIVE * torch.maximum(ag.abs(), fd.abs()) + 1e-9 * scale
    return (((ag - fd).abs() > bound) | (torch.isfinite(ag) != torch.isfinite(fd))).tolist()


def _runs(xs: list[float], marked: list[bool], skip: set[float]) -> list[tuple[int, int]]:
    """Index ranges [i, j] of consecutive marked points; a point in `skip` (a jump's spike)
    neither breaks a run nor starts one."""
    runs: list[tuple[int, int]] = []
    start = last = None
    for k, (x, m) in enumerate(zip(xs, marked, strict=True)):
        if x in skip:
            continue
        if m:
            start = k if start is None else start
            last = k
        elif start is not None:
            runs.append((start, last))  # type: ignore[arg-type]
            start = None
    if start is not None:
        runs.append((start, last))  # type: ignore[arg-type]
    return runs


def _parted(xs: list[float], ags: list[float], fds: list[float], apart: list[bool],
            spikes: set[float]) -> list[dict[str, float]]:
    """The stretches where the two derivatives part; one lone point is a kink's averaging
    (the stencil straddles it), not a parting, unless the grid has nothing but lone points."""
    out = []
    for i, j in _runs(xs, apart, spikes):
        points = [k for k in range(i, j + 1) if xs[k] not in spikes]
        if len(points) < 2 and len(xs) > 3:
            continue
        ag = torch.tensor([ags[k] for k in points], dtype=torch.float64)
        fd = torch.tensor([fds[k] for k in points], dtype=torch.float64)
        out.append({"from": xs[i], "to": xs[j], "points": len(points),
                    "autograd": float(ag.median()), "finite_difference": float(fd.median()),
                    "apart": float((ag - fd).abs().nan_to_num(nan=float("inf")).max())})
    return out


def _zeros(xs: list[float], ags: list[float], fds: list[float], spikes: set[float]
           ) -> dict[str, list[list[float]]]:
    """Where each derivative is zero: autograd exactly (it writes 0), the difference quotient
    within round-off of the scale of f's slopes."""
    scale = max((abs(v) for v in [*ags, *fds] if math.isfinite(v)), default=0.0)
    tiny = 1e-9 * max(scale, 1.0)
    out = {}
    for name, values in (("autograd", ags), ("finite_difference", fds)):
        flat = [abs(v) <= (0.0 if name == "autograd" else tiny) for v in values]
        out[name] = [[xs[i], xs[j]] for i, j in _runs(xs, flat, spikes if name != "autograd"
                                                       else set())]
    return out


def _resolution(xs: list[float], ags: list[float], fds: list[float], halves: list[float],
                spikes: set[float]) -> tuple[float, float]:
    """The difference quotient's largest estimated error away from the spikes, and the
    largest finite |derivative| of either engine."""
    errors = [ERROR_FACTOR * abs(a - b) for x, a, b in zip(xs, fds, halves, strict=True)
              if x not in spikes and math.isfinite(a - b)]
    scale = max((abs(v) for v in [*ags, *fds] if math.isfinite(v)), default=0.0)
    return max(errors, default=0.0), scale
