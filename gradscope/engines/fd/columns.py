"""Dense inputs: one Jacobian column per element. Every column gets a two-point difference
first (half of gradcheck's cost per column is what makes dense inputs affordable), shared by a
group of columns where a claimed sparsity pattern allows (grouped.py); `refine` makes a new
estimate whose doubted columns are extrapolated from four points with an error bound — a
doubted column's group as a group where two weightings agree, else every column of the group
on its own. Kinks and unconverged columns are retried with smaller steps, columns swamped by
round-off with larger ones (stencil.NOISE_DOMINATED)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from gradscope.engines.fd.batcher import Batcher, Halfway, rejection
from gradscope.engines.fd.grouped import agreeing, colouring, grouped
from gradscope.engines.fd.point import Point
from gradscope.engines.fd.policy import MAX_EPS, step_of
from gradscope.engines.fd.result import ColumnEstimate
from gradscope.engines.fd.stencil import (
    REFINE_ERROR,
    REFINE_FACTOR,
    REFINE_ROUNDS,
    WIDEN_FACTOR,
    WIDEN_ROUNDS,
    Progress,
    col_max,
    noise_dominated,
    numel,
)
from gradscope.errors import TargetError

# Error bounds and second differences of dense columns are kept in float32: they bound and
# look for kinks, and need no float64 digits; a (6,000 × 12,000) estimate holds 1.15 GB
# instead of 1.7 (the estimate itself stays in the check's precision)
BOUNDS = torch.float32

@dataclass
class _Work:
    """The columns of one input while they are being estimated (the estimate is frozen
    from it when every round is done)."""

    partial: torch.Tensor  # (n_out, n_in)
    error: torch.Tensor
    kink: torch.Tensor  # flat (n_in,)
    points: torch.Tensor  # (n_in,) int8
    kink_by_branch: dict[int, torch.Tensor] = field(default_factory=dict)  # flat masks
    forward_calls: int = 0
    rejected: torch.Tensor | None = None  # flat: the target rejected the column's last try
    raised: TargetError | None = None  # the first rejection
    why: str = ""  # what it said, in one line (kept from the estimate a refinement starts at)
    groups: torch.Tensor | None = None  # (n_in,): the group a column shares differences with
    second: torch.Tensor | None = None  # (n_out, n_in): two-point second differences (NaN: none)
    step: torch.Tensor | None = None  # (n_in,): the step each kept column was made with
    noisy: torch.Tensor | None = None  # (n_in,): swamped by round-off at every step tried
    widened: int = 0  # columns kept at a step larger than the first


class ColumnEstimator:
    def __init__(self, point: Point, batcher: Batcher) -> None:
        self.point, self.batcher = point, batcher
        self.patterns: dict[str, torch.Tensor] = {}  # input → the claim its groups follow

    def estimate(self, name: str, progress: Progress | None = None,
                 pattern: torch.Tensor | None = None) -> ColumnEstimate:
        """Two-point differences for every column of `name`; `pattern`: where the Jacobian is
        claimed nonzero (n_out, n_in), to share differences between columns (grouped.py)."""
        x = self.point.values[name]
        n_in, n_out = x.numel(), numel(self.point.out_shape)
        # (n_out, n_in) laid out column by column: a batch of columns is written as
        # contiguous rows of the storage, not scattered across every row (a (12,000 × 6,000)
        # estimate spent 6 of its 10 s in those strided writes)
        zeros = torch.zeros(n_in, n_out, dtype=self.point.dtype, device=x.device).t()
        work = _Work(zeros, zeros.to(BOUNDS), torch.zeros(n_in, dtype=torch.bool,
                                                          device=x.device),
                     torch.zeros(n_in, dtype=torch.int8, device=x.device))
        todo = torch.arange(n_in, device=x.device)
        groups = colouring(pattern) if pattern is not None \
            and self.batcher.columns(name) is None else None
        if groups is not None:
            self.patterns[name] = pattern
            shared = grouped(self.point, self.batcher, name, pattern, groups)
            work.partial, work.error = shared.partial, shared.error
            work.forward_calls, work.groups = shared.forward_calls, shared.groups
            work.points[shared.groups >= 0] = 2
            todo = torch.nonzero(shared.groups < 0).reshape(-1)
            if progress is not None:
                progress(n_in - todo.numel())
        self._rounds(work, name, todo, self.point.step(name).reshape(-1)[todo], 2, progress)
        note = (f"per-element loop ({self.batcher.vmap_failed})" if self.batcher.vmap_failed
                else "vmap batches")
        if groups is not None:
            note += f", {int(groups.max()) + 1:,} groups of columns"
        return self._frozen(work, name, note, every=True)

    def refine(self, est: ColumnEstimate, mask: torch.Tensor) -> tuple[ColumnEstimate, int]:
        """A new estimate whose two-point columns under `mask` (input-shaped) are refined to
        four points, and how many were. A doubted column's group is refined as a group where
        two weightings agree, else column by column (grouped.py)."""
        assert est.points is not None
        doubted = mask.reshape(-1).to(est.points.device) & (est.points == 2)
        if not bool(doubted.any()):
            return est, 0
        work = _Work(est.partial.clone(), est.error.clone(), est.kink.reshape(-1).clone(),
                     est.points.clone(),
                     {k: m.reshape(-1).clone() for k, m in est.kink_by_branch.items()},
                     est.forward_calls,
                     est.rejected.reshape(-1).clone() if est.rejected is not None else None,
                     why=est.why, groups=est.groups,
                     second=est.second.clone() if est.second is not None else None,
                     noisy=est.noisy.reshape(-1).clone() if est.noisy is not None else None,
                     widened=est.widened)
        count = 0
        if est.groups is not None:
            shared = est.groups[doubted & (est.groups >= 0)].unique()
            if shared.numel():
                count = self._refine_groups(work, est.name, shared)
                # every column of a group taken apart, doubted or not: an entry the claim
                # calls zero may sit in any of them
                left = (est.groups >= 0) & (work.groups < 0)  # type: ignore[operator]
                doubted = (doubted | left) & (work.points == 2)
        halfway = self._halfway(work, est.name) & doubted
        for cols, reuse in ((halfway, True), (doubted & ~halfway, False)):
            todo = torch.nonzero(cols).reshape(-1)
            self._rounds(work, est.name, todo,
                         self.point.step(est.name).reshape(-1)[todo].clone(), 4, None, reuse)
            count += int(todo.numel())
        return self._frozen(work, est.name, est.note), count

    def _halfway(self, work: _Work, name: str) -> torch.Tensor:
        """(n_in,) the two-point columns a refinement completes with ±h/2 only: made from
        perturbed copies at the base step (their second differences kept), off any kink."""
        if work.second is None or self.batcher.columns(name) is not None:
            return torch.zeros_like(work.kink)
        kept = torch.isfinite(work.second).all(0) & (work.points == 2) & ~work.kink
        return kept if work.rejected is None else kept & ~work.rejected

    def _refine_groups(self, work: _Work, name: str, shared: torch.Tensor) -> int:
        """The groups `shared` extrapolated as groups under two weightings; where those
        agree the columns take the first's four-point values, else they leave their group
        (and stay two-point, for the column-by-column refinement). Returns columns refined."""
        groups, pattern = work.groups, self.patterns[name]
        assert groups is not None
        first = grouped(self.point, self.batcher, name, pattern, groups, shared, 4)
        second = grouped(self.point, self.batcher, name, pattern, groups, shared, 4, "again")
        work.forward_calls += first.forward_calls + second.forward_calls
        ok = agreeing(first, second, groups, shared)
        # (an estimate that has not converged is retried column by column at smaller steps)
        ok &= col_max(first.error) <= REFINE_ERROR * (col_max(first.partial, absolute=True) + 1)
        work.partial[:, ok] = first.partial[:, ok]
        work.error[:, ok] = first.error[:, ok].to(work.error.dtype)
        work.points[ok] = 4
        work.groups = torch.where(torch.isin(groups, shared) & ~ok, -1, groups)
        return int(ok.sum())

    def _frozen(self, work: _Work, name: str, note: str, every: bool = False
                ) -> ColumnEstimate:
        """The estimate; columns the target rejected at every step tried come out NaN and
        `rejected` (`every` column estimated and each rejected: the target's error is
        raised)."""
        x = self.point.values[name]
        by_branch = {k: m.reshape(x.shape) for k, m in work.kink_by_branch.items()
                     if bool(m.any())}
        rejected = None
        if work.rejected is not None and bool(work.rejected.any()):
            if work.raised is not None and bool(work.rejected.all()) and every:
                raise work.raised  # no column has an estimate: the input is skipped
            work.partial[:, work.rejected] = float("nan")
            work.error[:, work.rejected] = float("nan")
            work.kink[work.rejected] = False
            rejected = work.rejected.reshape(x.shape)
        noisy = None
        if work.noisy is not None and bool(work.noisy.any()):
            noisy = work.noisy.reshape(x.shape) if rejected is None \
                else work.noisy.reshape(x.shape) & ~rejected
        return ColumnEstimate(name, tuple(x.shape), self.point.out_shape, work.partial,
                              work.error, work.kink.reshape(x.shape), by_branch,
                              work.forward_calls, note, work.points, rejected, work.why,
                              noisy, work.widened, groups=work.groups, second=work.second)

    def _rounds(self, work: _Work, name: str, todo: torch.Tensor, h: torch.Tensor,
                points: int, progress: Progress | None, reuse: bool = False) -> None:
        """Estimate the columns `todo` (steps `h`), retrying kinks and unconverged columns
        with smaller steps, keeping per column the trustworthy estimate. `reuse`: the first
        round completes the columns' two-point estimates (`Halfway`)."""
        x = self.point.values[name]
        n_in, n_out = x.numel(), numel(self.point.out_shape)
        step = torch.zeros(n_in, dtype=self.point.dtype, device=x.device)
        step[todo] = h
        first = step.clone()
        first_round = torch.ones(n_in, dtype=torch.bool, device=x.device)
        for round_ in range(REFINE_ROUNDS + 1):
            retry = []
            for idx in self.batcher.chunks(todo, n_in, n_out, name):
                use = points if round_ == 0 else 4
                halfway = None
                if reuse and round_ == 0:
                    assert work.second is not None
                    halfway = Halfway(work.partial[:, idx], work.error[:, idx],
                                      work.second[:, idx])
                needs = self._keep(work, name, x, idx, step[idx], use, first_round, halfway)
                retry.append(idx[needs])
                if progress is not None and round_ == 0:
                    progress(len(idx))
            todo = torch.cat(retry) if retry else todo[:0]
            if round_ == REFINE_ROUNDS or todo.numel() == 0:
                break
            step[todo] = step[todo] / REFINE_FACTOR
        unconverged = self._unconverged(work)
        if not bool(unconverged.any()):
            return
        self._widen(work, name, unconverged & self._dominated(work, unconverged), first)
        unconverged = self._unconverged(work)
        noisy = unconverged & self._dominated(work, unconverged)
        work.kink |= unconverged & ~noisy
        if bool(noisy.any()):
            work.noisy = noisy if work.noisy is None else work.noisy | noisy

    def _unconverged(self, work: _Work) -> torch.Tensor:
        """(n_in,) extrapolated columns off any kink that have not converged."""
        limit = self.point.unconverged
        unconverged = col_max(work.error) > limit * (col_max(work.partial, absolute=True) + 1)
        return unconverged & (work.points == 4) & ~work.kink

    def _dominated(self, work: _Work, cols: torch.Tensor) -> torch.Tensor:
        """(n_in,) which of the columns `cols` have an error bound that is round-off at the
        step each was made with, in every row."""
        out = torch.zeros_like(cols)
        if work.step is None or not bool(cols.any()):
            return out
        scale = self.point.roundoff_scale().reshape(-1, 1)
        out[cols] = noise_dominated(work.error[:, cols], scale,
                                    work.step[cols].reshape(1, -1)).all(0)
        return out

    def _widen(self, work: _Work, name: str, cols: torch.Tensor, first: torch.Tensor) -> None:
        """The columns `cols` retried at steps WIDEN_FACTOR, WIDEN_FACTOR², … times `first` (at
        most MAX_EPS of the element) while they stay unconverged; a larger step that crosses a
        kink, leaves the target's domain or has a larger error is never kept."""
        x = self.point.values[name]
        n_in, n_out = x.numel(), numel(self.point.out_shape)
        cap, h, tried = step_of(x.reshape(-1), MAX_EPS), first, cols.clone()
        held = torch.zeros(n_in, dtype=torch.bool, device=x.device)  # never a first round
        for _ in range(WIDEN_ROUNDS):
            wider = torch.minimum(h * WIDEN_FACTOR, cap)
            cols = cols & (wider > h)
            todo = torch.nonzero(cols).reshape(-1)
            if todo.numel() == 0:
                break
            h = wider
            try:
                for idx in self.batcher.chunks(todo, n_in, n_out, name):
                    self._keep(work, name, x, idx, h[idx], 4, held)
            except TargetError:  # the target refuses larger steps: the estimates stand
                break
            cols = cols & self._unconverged(work)
        if work.step is not None:
            work.widened += int((tried & (work.step > first)).sum())

    def _keep(self, work: _Work, name: str, x: torch.Tensor, idx: torch.Tensor,
              h: torch.Tensor, use: int, first_round: torch.Tensor,
              halfway: Halfway | None = None) -> torch.Tensor:
        """One batch of columns: keep per column the trustworthy estimate (whatever the first
        round gave, then off-kink first, then the smaller error); returns which to retry."""
        (est, e, kinks, second), rejected = self.batcher.tolerant(name, x, idx, h, use,
                                                                  halfway)
        work.forward_calls += (2 if halfway is not None else use) * len(idx)
        new_kink = torch.zeros(len(idx), dtype=torch.bool, device=x.device)
        for m in kinks.values():
            new_kink |= m
        col_err, old_err = col_max(e), col_max(work.error[:, idx])
        better = first_round[idx] | (~new_kink & (work.kink[idx] | (col_err < old_err)))
        better &= ~rejected.mask
        if rejected.error is not None:  # (at smaller steps too) a column with no estimate of
            # this pass has none: a two-point one made before does not count, since the
            # extrapolation that would bound its error failed; a retry's failure keeps this
            # pass's own estimate
            if work.rejected is None:
                work.rejected = torch.zeros(x.numel(), dtype=torch.bool, device=x.device)
            if work.raised is None:
                work.raised = rejected.error
                work.why = work.why or rejection(rejected.error)
            work.rejected[idx[rejected.mask & first_round[idx]]] = True
        first_round[idx] &= rejected.mask
        keep = idx[better]
        if work.rejected is not None:
            work.rejected[keep] = False
        if work.step is None:
            work.step = torch.zeros(x.numel(), dtype=h.dtype, device=x.device)
        work.step[keep] = h[better]
        work.partial[:, keep] = est[:, better]
        work.error[:, keep] = e[:, better].to(work.error.dtype)
        work.kink[keep] = new_kink[better]
        work.points[keep] = use
        if second is not None:
            if work.second is None:
                work.second = torch.full_like(work.partial, float("nan"), dtype=BOUNDS)
            work.second[:, keep] = second[:, better].to(work.second.dtype)
        elif work.second is not None:
            work.second[:, keep] = float("nan")
        for k in set(work.kink_by_branch) | set(kinks):
            mask = work.kink_by_branch.setdefault(
                k, torch.zeros(x.numel(), dtype=torch.bool, device=x.device))
            mask[keep] = kinks[k][better] if k in kinks else False
        needs = new_kink & ~rejected.mask
        if use == 4:  # only an extrapolated estimate knows its truncation error
            needs |= col_err > REFINE_ERROR * (col_max(est, absolute=True) + 1)
        return needs

