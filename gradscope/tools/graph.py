"""`gradscope graph` and `gradscope sweep`: the backward graph with its gradient flow, and one
input moved over a range with f, the autograd derivative and the finite-difference derivative.

Both reuse the pipeline's input handling and the gradient-flow trace; they return plain
dataclasses that render as a rich Tree / terminal plot, JSON, or (graph) Graphviz DOT.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from gradscope._version import __version__
from gradscope.diagnose import flow
from gradscope.errors import TargetError, UsageError
from gradscope.inputs.bind import Request, prepare, upstream_for, validate
from gradscope.report import build as assemble
from gradscope.report.model import Diagnostic
from gradscope.targets import python as usercode
from gradscope.targets.expression import ExpressionTarget, resolve

MAX_POINTS = 5000


@dataclass
class GraphNode:
    id: int
    name: str
    op: str
    where: str
    kind: str
    status: str
    shape: list[int] | None
    received: dict[str, Any] | None
    passed: list[dict[str, Any] | None]
    children: list[int]
    leaf: str | None = None


@dataclass
class GraphReport:
    target: str
    target_kind: str
    root: int | None
    nodes: list[GraphNode]
    diagnostics: list[Diagnostic]
    schema: str = "gradscope.tools.graph/1"
    version: str = __version__

    @property
    def passed(self) -> bool:
        return not any(n.status for n in self.nodes)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        return {"schema": data.pop("schema"), "version": data.pop("version"), **data}

    def to_json(self, indent: int | None = 2) -> str:
        from gradscope.render.json import dumps

        return dumps(self.to_dict(), indent=indent)

    def to_dot(self) -> str:
        from gradscope.render.graph import dot

        return dot(self)


def _prepare(request: Request):
    validate(request)
    target, grad, _, cast = prepare(request)
    return target, grad, cast


def _sourced(target: Any):
    if isinstance(target, ExpressionTarget):
        return target.sourced, False
    return usercode.sourced(target), True


def graph(request: Request) -> GraphReport:
    """The backward graph of the target at the request's inputs, with gradient flow."""
    target, grad, cast = _prepare(request)
    out = target.forward(cast)
    upstream = upstream_for(grad, out)
    forward, anomaly = _sourced(target)
    try:
        traced = flow.trace(forward, cast, upstream.detach(), anomaly=anomaly,
                            ours=usercode.OURS, norms=True)
    except (UsageError, TargetError):
        raise
    except Exception as exc:
        raise usercode.user_error(exc, "backward") from None
    nodes = [GraphNode(n.id, n.name, n.op, n.label(), n.kind, n.status,
                       list(n.shape) if n.shape is not None else None,
                       asdict(n.received) if n.received else None,
                       [asdict(p) if p else None for p in n.passed], n.children, n.leaf)
             for n in traced.walk()]
    return GraphReport(target.text, target.target_kind, traced.root, nodes,
                       flow.diagnostics(traced, cast, set(target.names)))


@dataclass
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
    schema: str = "gradscope.sweep/1"
    version: str = __version__

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        return {"schema": data.pop("schema"), "version": data.pop("version"), **data}

    def to_json(self, indent: int | None = 2) -> str:
        from gradscope.render.json import dumps

        return dumps(self.to_dict(), indent=indent)


def sweep(request: Request, var: str, lo: float, hi: float, points: int) -> SweepReport:
    """Move `var` (a scalar input) over [lo, hi]; everything else stays fixed. The function
    plotted is vᵀf with v the upstream (ones by default), so any output shape works."""
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise UsageError(f"--range {lo},{hi}: needs two finite numbers LO < HI")
    if not 2 <= points <= MAX_POINTS:
        raise UsageError(f"--points must be between 2 and {MAX_POINTS}, got {points}")
    if var in request.at:
        raise UsageError(f"--var {var} is swept over --range; do not also give it with --at")
    target = resolve(request.target, args=request.args, init=request.init, base=request.base)
    if var not in target.names:
        raise UsageError(f"--var {var} is not an input of the target; inputs are: "
                         f"{', '.join(target.names)}")
    shapes = {n: () for n in target.names if n not in request.shapes}
    request.shapes = {**shapes, **request.shapes, var: ()}
    request.at = {**request.at, var: "0"}
    _, grad, cast = _prepare(request)
    dtype, device = cast[var].dtype, cast[var].device
    xs = torch.linspace(lo, hi, points, dtype=torch.float64)
    # Half the grid spacing by default: every jump inside the range falls into exactly one
    # stencil and shows as a spike of height jump/spacing; --eps asks for a relative step.
    spacing = (hi - lo) / (points - 1)

    def phi(x: torch.Tensor) -> torch.Tensor:
        out = target.forward({**cast, var: x.to(dtype)})
        v = torch.ones_like(out) if grad is None else grad.tensor.to(out.device, out.dtype)
        if v.shape != out.shape:
            raise UsageError(f"--grad has shape {tuple(v.shape)} but the output has shape "
                             f"{tuple(out.shape)}")
        return (v * out).sum()

    f_vals, ag_vals, fd_vals = [], [], []
    for x in xs.tolist():
        point = torch.tensor(x, dtype=torch.float64, device=device, requires_grad=True)
        with torch.enable_grad():
            value = phi(point)
            (g,) = torch.autograd.grad(value, point, allow_unused=True) if value.requires_grad \
                else (None,)
        h = request.eps * max(1.0, abs(x)) if request.eps else spacing / 2
        with torch.no_grad():
            up = phi(torch.tensor(x + h, dtype=torch.float64, device=device))
            down = phi(torch.tensor(x - h, dtype=torch.float64, device=device))
        f_vals.append(float(value.detach()))
        ag_vals.append(float(g) if g is not None else 0.0)
        fd_vals.append(float((up - down) / (2 * h)))
    report = SweepReport(target.text, var, xs.tolist(), f_vals, ag_vals, fd_vals,
                         {n: assemble.plain(t) for n, t in cast.items() if n != var},
                         request.eps or spacing / 2)
    report.jumps, report.vanishing = _features(report)
    return report


def _features(r: SweepReport) -> tuple[list[float], int]:
    fd = torch.tensor(r.finite_difference, dtype=torch.float64)
    ag = torch.tensor(r.autograd, dtype=torch.float64)
    finite = torch.isfinite(fd)
    typical = float(fd[finite].abs().median()) if bool(finite.any()) else 0.0
    scale = max(typical, 1.0)
    # A jump inside one stencil makes the difference quotient jump/step: far from autograd's
    # value and from the typical slope. A kink only averages two slopes and is not a spike.
    spike = (~finite) | ((fd - ag).abs() > 10 * scale)
    jumps = [x for x, s in zip(r.x, spike.tolist(), strict=True) if s]
    # Autograd "misses" f when integrating its derivative recovers little of how much f moves
    # (round: f climbs 4 steps, the derivative integrates to 0). A flat stretch that f really
    # has (abs(x) + clamp(x, -1, 1) on [-1, 0]) is not vanishing.
    f = torch.tensor(r.f, dtype=torch.float64)
    x = torch.tensor(r.x, dtype=torch.float64)
    usable = torch.isfinite(f) & torch.isfinite(ag)
    variation = float(f[usable].diff().abs().sum()) if int(usable.sum()) > 1 else 0.0
    covered = float((ag[usable].abs()[1:] * x[usable].diff()).sum()) if int(usable.sum()) > 1 \
        else 0.0
    misses = variation > 0 and covered < 0.5 * variation
    vanishing = int(((ag == 0) & ~spike).sum()) if misses else 0
    return jumps, vanishing
