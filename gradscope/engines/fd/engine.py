"""The finite-difference engine: central differences with Richardson extrapolation, in float64,
composed of the point it works around (point.py), a batcher of perturbed evaluations
(batcher.py), an estimator per input structure (elementwise.py, columns.py), a sampler
(sampler.py) and a prober of the target's structure (probe.py).

For each input it estimates the Jacobian columns J·e_i with steps h_i = eps·max(1, |x_i|)
(policy.py). An estimate starts as a two-point central difference (f(x+h) − f(x−h))/2h, which
carries a round-off bound only; a comparison that doubts an estimate has it *refined*: a new
estimate whose doubted elements add the h/2 points, (4·D(h/2) − D(h))/3 extrapolated, with an
error estimate (extrapolation difference plus round-off). A two-point estimate that agrees with
autograd within the tolerance is accepted: its truncation error would have to cancel a real bug
to hide it.

* *elementwise* inputs (each output element depends on at most one element of the input, which
  the target declares or probing finds) are perturbed all at once: two forward calls for the
  whole tensor (four, i.e. extrapolated from the start, below TWO_POINT_FROM elements, where
  the cost is negligible);
* otherwise each element is its own perturbation (a column), batched by the batcher — or
  columns share perturbations where a claimed sparsity pattern (`claimed`: autograd's, from the
  runner) lets them, verified as they go (grouped.py).

A target may also report *branch ids* (which piece of each kinky op every element is on). An
element whose stencil changes a branch id straddles a kink, jump or pole: it is retried with
smaller steps and, if it still straddles, marked as such and never compared as a mismatch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

import torch

from gradscope.engines.fd.batcher import Batcher, rejection
from gradscope.engines.fd.columns import ColumnEstimator
from gradscope.engines.fd.elementwise import ElementwiseEstimator
from gradscope.engines.fd.grouped import worth_asking
from gradscope.engines.fd.point import Around, Point, Traced
from gradscope.engines.fd.probe import PROBED_ELEMENTS, Prober
from gradscope.engines.fd.result import (
    ColumnEstimate,
    Directional,
    ElementwiseEstimate,
    Estimate,
)
from gradscope.engines.fd.sampler import sample
from gradscope.engines.fd.stencil import (
    PROBE_FROM,
    REFINE_FACTOR,
    REFINE_ROUNDS,
    STENCIL,
    TWO_POINT_FROM,
    Progress,
)
from gradscope.engines.fd.stencil import estimate as stencil_estimate
from gradscope.errors import TargetError
from gradscope.tensors import branch_changed, held_like, max_abs, shares_storage

# input name → where its Jacobian is claimed nonzero, (n_out, n_in) bool, or None
Claimed = Callable[[str], torch.Tensor | None]


class FiniteDifferences:
    """Finite differences of a traced target around fixed values (in `dtype`, float64 unless
    the target cannot take it). `elementwise`: inputs the target declares elementwise;
    `probe`: the target is code gradscope cannot read: look for elementwise structure it cannot
    declare, and for kinks it cannot report."""

    def __init__(self, fn: Traced, values: Mapping[str, torch.Tensor], *,
                 elementwise: set[str], eps: float, dtype: torch.dtype = torch.float64,
                 two_point_from: int = TWO_POINT_FROM, around: Around | None = None,
                 probe: bool = False, round_off: torch.dtype | None = None,
                 claimed: Claimed | None = None, batched: bool = True,
                 diagonal: Callable[[str], bool] | None = None) -> None:
        """`batched`: columns may be evaluated in vmap batches (False: a loop of calls);
        `diagonal`: whether autograd's Jacobian of an input can be diagonal — where it cannot,
        the input is not probed elementwise (saturated points fool the probe)."""
        self.point = Point(fn, values, eps=eps, dtype=dtype, around=around, round_off=round_off,
                           find_kinks=probe)
        self.elementwise = set(elementwise)
        self.probe = probe
        self.two_point_from = two_point_from
        # (the set itself, not a closure over self: no reference cycle keeps the estimates)
        self.batcher = Batcher(self.point, self.elementwise)
        if not batched:
            self.batcher.vmap_failed = "asked for one evaluation at a time"
        self.prober = Prober(self.point)
        self.columns = ColumnEstimator(self.point, self.batcher)
        self.elements = ElementwiseEstimator(self.point)
        self._cache: dict[str, Estimate] = {}
        self._claimed = claimed
        self._diagonal = diagonal

    # ------------------------------------------------------------ what it works around
    @property
    def values(self) -> dict[str, torch.Tensor]:
        return self.point.values

    @property
    def out(self) -> torch.Tensor:
        return self.point.out

    @property
    def eps(self) -> float:
        return self.point.eps

    @property
    def probed(self) -> dict[str, int]:
        """Input → forward calls its elementwise probe took (where it ran)."""
        return self.prober.calls

    def flops(self) -> int:
        return self.point.flops()

    def column_width(self, name: str) -> int | None:
        return self.batcher.column_width(name)

    def is_elementwise(self, name: str) -> bool:
        """Whether every element of `name` can be perturbed at once: declared by the target,
        or (with `probe`, for large inputs) found by probing."""
        if name in self.elementwise:
            return True
        if not self.probe or name in self.prober.calls:
            return False
        if self.values[name].numel() * max(1, self.out.numel()) <= PROBE_FROM:
            return False
        if self.prober.elementwise(name) and (self._diagonal is None or self._diagonal(name)):
            self.elementwise.add(name)
            return True
        return False

    # ------------------------------------------------------------ estimates
    def estimate(self, name: str, progress: Progress | None = None) -> Estimate:
        """Every element of `name` (computed once)."""
        if name not in self._cache:
            if name in self.elementwise:
                big = self.values[name].numel() >= self.two_point_from
                self._cache[name] = self.elements.estimate(name, 2 if big else 4)
            else:
                self._cache[name] = self.columns.estimate(name, progress, self._pattern(name))
        return self._cache[name]

    def _pattern(self, name: str) -> torch.Tensor | None:
        """Where `name`'s Jacobian is claimed nonzero, (n_out, n_in), if asking can pay."""
        if self._claimed is None or not worth_asking(self.out.numel(),
                                                     self.values[name].numel()):
            return None
        pattern = self._claimed(name)
        want = (self.out.numel(), self.values[name].numel())
        return pattern if pattern is not None and tuple(pattern.shape) == want else None

    def sampled(self, name: str, count: int, seed: int, progress: Progress | None = None
                ) -> Estimate:
        """Four-point columns for `count` seeded random elements only."""
        self._cache[name] = sample(self.point, self.batcher, name, count, seed, progress)
        return self._cache[name]

    @property
    def vmap_failed(self) -> str | None:
        return self.batcher.vmap_failed

    @property
    def batched_apart(self) -> str | None:
        """How a vmap batch disagreed with a plain call at the same point (None: it agreed,
        or none ran); the plain calls decided."""
        return self.batcher.batched_apart

    def refine(self, est: Estimate, mask: torch.Tensor) -> tuple[Estimate, int]:
        """A new estimate whose two-point elements (or columns) under `mask` are refined to
        four points with an error estimate, and how many were."""
        if est.points is None:  # sampled columns have four points already
            return est, 0
        try:
            if isinstance(est, ElementwiseEstimate):
                new, count = self.elements.refine(est, mask)
            else:
                assert isinstance(est, ColumnEstimate)
                new, count = self.columns.refine(est, mask)
        except TargetError as exc:  # rejected too often to find where: every doubted
            # two-point element is left without an estimate it could be judged by
            new, count = rejected(est, mask, exc), 0
        self._cache[est.name] = new
        return new, count

    # ------------------------------------------------------------ the Engine protocol, J·t
    @property
    def output(self) -> torch.Tensor:
        return self.out

    def vjp(self, upstream: torch.Tensor) -> dict[str, torch.Tensor]:
        """vᵀJ for every input from its estimate (the error bounds and kink masks stay in
        `estimate(name)`)."""
        return {name: self.estimate(name).vjp(upstream.to(self.point.dtype))[0]
                for name in self.values}

    def jvp(self, tangents: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """J·t along the tangents (see `directional`)."""
        return self.directional(tangents).value

    def directional(self, tangents: Mapping[str, torch.Tensor], measured_noise: bool = True,
                    points: int = 4, shrink: float = 1.0,
                    scratch: dict[str, torch.Tensor] | None = None) -> Directional:
        """J·t by perturbing every input along its tangent at once (four forward calls).
        `measured_noise=False`: the error bound takes round-off as eps·|f| without measuring
        f's own (two forward calls fewer; a bound that may be too small, for a caller that
        treats a disagreement as a reason to look closer, never as a verdict). `points=2`: a
        central difference whose bound is round-off only (for a caller that extrapolates
        when it disagrees). `shrink`: the step is that much smaller than the usual one (a
        caller whose stencil crossed a kink tries again inside it). `scratch`: the caller's
        buffers for the perturbed copies, kept across its calls (at a model's size a new copy
        per call is a gigabyte the kernel faults in and zeroes again)."""
        point = self.point
        t = dict(tangents)  # (each converted to the point's dtype when added: one at a time)
        size = max(max_abs(v) for v in t.values())  # (aminmax: no |v| copy of a model)
        if size == 0.0:
            zeros = torch.zeros(point.out_shape, dtype=point.dtype, device=point.out.device)
            return Directional(zeros, zeros, zeros.bool())
        big = max(1.0, max(max_abs(v) for v in point.values.values()))
        h = point.eps * big / size / shrink
        for _ in range(REFINE_ROUNDS):  # smaller steps may stay inside the target's domain
            try:
                return self._along(t, h, measured_noise, points, scratch)
            except TargetError:
                h /= REFINE_FACTOR
        return self._along(t, h, measured_noise, points, scratch)

    def _along(self, t: Mapping[str, torch.Tensor], h: float, measured_noise: bool = True,
               points: int = 4, scratch: dict[str, torch.Tensor] | None = None
               ) -> Directional:
        point = self.point
        outs, changed = [], torch.zeros(point.out_shape, dtype=torch.bool,
                                        device=point.out.device)
        # One perturbed copy for every point, each written whole: at a model's size a new one
        # per point is a gigabyte the kernel faults in and zeroes again. (Each point gets a
        # tensor object of its own, a view: code caching by tensor misses.)
        held = {} if scratch is None else scratch
        moved = {k: held_like(held, k, point.values[k]) for k in t}
        for scale in STENCIL[:points]:
            vals = {k: _moved(v, t[k], scale * h, moved[k]) if k in t else v
                    for k, v in point.values.items()}
            out, branches = point.fn(vals)
            del vals
            if any(shares_storage(out, m) for m in moved.values()):  # (f returned its input)
                out = out.clone()
            outs.append(out.expand(point.out_shape))
            for b, b0 in zip(branches, point.branches, strict=True):
                diff = branch_changed(b, b0)
                if bool(diff.any()):
                    try:
                        changed |= diff.expand(point.out_shape) if diff.ndim <= len(
                            point.out_shape) else diff.any()
                    except RuntimeError:  # a reduction lies in between: every output moves
                        changed |= True
        h_t = torch.tensor(h, dtype=point.dtype, device=point.out.device)
        noise = point.noise() if measured_noise else 0.0
        est, err = stencil_estimate(outs, h_t, point.machine_eps, noise)
        return Directional(est, err, changed)

    # ------------------------------------------------- does the output depend on an element?
    def depends(self, name: str, flat: torch.Tensor, budget: int = PROBED_ELEMENTS
                ) -> torch.Tensor:
        """For the elements of `name` at flat positions `flat`: True where the output moves
        when the element alone takes other values, False where it ignores it (probe.py)."""
        return self.prober.depends(name, flat, name in self.elementwise, budget)


def _moved(v: torch.Tensor, t: torch.Tensor, step: float, out: torch.Tensor) -> torch.Tensor:
    """v + step·t written into `out` (a view of it returned). A tangent in another dtype is
    converted into `out` first: an add of mixed dtypes casts into a temporary of its own."""
    if t.dtype == v.dtype:
        torch.add(v, t, alpha=step, out=out)
    else:
        torch.add(v, out.copy_(t), alpha=step, out=out)
    return out.view_as(v)


def rejected(est: Estimate, mask: torch.Tensor, exc: TargetError) -> Estimate:
    """`est` with its doubted two-point elements marked rejected (NaN where they were)."""
    assert est.points is not None
    todo = mask.reshape(est.points.shape).to(est.points.device) & (est.points == 2)
    marked = todo if est.rejected is None else est.rejected | todo
    wide = todo.expand(est.partial.shape) if isinstance(est, ElementwiseEstimate) \
        else todo.reshape(1, -1).expand(est.partial.shape)
    return replace(est, partial=est.partial.masked_fill(wide, float("nan")),
                   error=est.error.masked_fill(wide, float("nan")), kink=est.kink & ~todo,
                   rejected=marked, why=est.why or rejection(exc))
