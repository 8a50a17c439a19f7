"""Elementwise inputs: each output element depends on at most one element of the input (the
target declares it, or probing found it), so every element is perturbed at once: two forward
calls a round (four for an extrapolated estimate), retried with smaller steps where a stencil
crosses a kink, and with larger ones where round-off swamps it (stencil.NOISE_DOMINATED).
`refine` makes a new estimate with the doubted elements extrapolated."""

from __future__ import annotations

from dataclasses import replace

import torch

from gradscope.engines.fd.batcher import MAX_REJECTED, rejection
from gradscope.engines.fd.point import Point
from gradscope.engines.fd.policy import MAX_EPS, step_of
from gradscope.engines.fd.result import ElementwiseEstimate
from gradscope.engines.fd.stencil import (
    REFINE_ERROR,
    REFINE_FACTOR,
    REFINE_ROUNDS,
    STENCIL,
    WIDEN_FACTOR,
    WIDEN_ROUNDS,
    estimate,
    kinked,
    noise_dominated,
)
from gradscope.errors import TargetError
from gradscope.tensors import any_to_shape, branch_changed, sum_to_shape


class ElementwiseEstimator:
    def __init__(self, point: Point) -> None:
        self.point = point

    def estimate(self, name: str, points: int, mask: torch.Tensor | None = None
                 ) -> ElementwiseEstimate:
        """Every element perturbed at once: `points` forward calls a round (with `mask`, only
        the elements `refine` asked for)."""
        x = self.point.values[name]
        h = first = self.point.step(name)
        if mask is not None:
            h = torch.where(mask, h, 0.0)  # only the masked elements move (others come out NaN)
        calls = 0
        best: list | None = None
        rejected: torch.Tensor | None = None
        raised: TargetError | None = None
        for round_ in range(REFINE_ROUNDS + 1):
            # held (refused before, or outside `mask`): never a better estimate (a first
            # round's estimate is the best so far whatever it holds)
            still = None if best is None else h == 0
            found, refused, error, tries = self._tolerant(name, x, h, points)
            calls += points * tries
            if error is not None:  # never tried again: they had their smaller steps
                if round_ == 0:  # (later, only retries are refused: they keep round 0's)
                    rejected = refused
                raised = raised or error
                h = torch.where(refused, 0.0, h)
            best = found if still is None else _better(best, found, x, refused | still)
            retry = _retried(best, x, h, points, mask)
            if round_ == REFINE_ROUNDS or retry is None:
                break
            h = torch.where(retry, h / REFINE_FACTOR, h)
        assert best is not None
        noisy, widened = None, 0
        if points == 4:
            best, more = self._widened(name, x, best, first, mask, rejected)
            calls += more
            widened = int((best[4] > first).sum()) if more else 0
            unconverged = _beyond(best[0], best[1], x, self.point.unconverged) & ~best[2]
            if rejected is not None:
                unconverged &= ~rejected
            if bool(unconverged.any()):  # round-off at every step tried, or a kink or jump
                noisy = unconverged & self._dominated(best, x)
                best[2] = best[2] | (unconverged & ~noisy)
                noisy = noisy if bool(noisy.any()) else None
        est, err, kink, by_branch, _ = best
        why = ""
        if rejected is not None:
            assert raised is not None
            if mask is None and bool(rejected.all()):
                raise raised  # no element has an estimate: the input is skipped
            wide = rejected.expand(self.point.out_shape)
            est, err = est.masked_fill(wide, float("nan")), err.masked_fill(wide, float("nan"))
            kink = kink & ~rejected
            why = rejection(raised)
        return ElementwiseEstimate(
            name, tuple(x.shape), self.point.out_shape, est, err, kink,
            {k: m for k, m in by_branch.items() if bool(m.any())}, calls,
            points=torch.full(x.shape, points, dtype=torch.int8, device=x.device),
            rejected=rejected, why=why, noisy=noisy, widened=widened)

    def _dominated(self, best: list, x: torch.Tensor) -> torch.Tensor:
        """Input-shaped: elements whose error bound is round-off at the step it was made with
        (every output element they move)."""
        wide = best[4].expand(self.point.out_shape)
        clean = ~noise_dominated(best[1], self.point.roundoff_scale(), wide)
        return ~any_to_shape(clean, x.shape)

    def _widened(self, name: str, x: torch.Tensor, best: list, first: torch.Tensor,
                 mask: torch.Tensor | None, held: torch.Tensor | None) -> tuple[list, int]:
        """`best`, with its unconverged, noise-dominated elements retried at steps
        WIDEN_FACTOR, WIDEN_FACTOR², … times the first (at most MAX_EPS of the element) while
        they stay so, and the evaluations made. A larger step that crosses a kink, leaves the
        target's domain or has a larger error is never taken."""
        todo = _beyond(best[0], best[1], x, self.point.unconverged) & ~best[2]
        if mask is not None:
            todo &= mask
        if held is not None:
            todo &= ~held
        if not bool(todo.any()):
            return best, 0
        todo &= self._dominated(best, x)
        cap, h, calls = step_of(x, MAX_EPS), first, 0
        for _ in range(WIDEN_ROUNDS):
            wider = torch.minimum(h * WIDEN_FACTOR, cap)
            todo &= wider > h
            if not bool(todo.any()):
                break
            h = wider
            try:
                found, refused, _, tries = self._tolerant(name, x, torch.where(todo, h, 0.0), 4)
            except TargetError:  # the target refuses larger steps: the estimate stands
                break
            calls += 4 * tries
            best = _better(best, found, x, refused | ~todo)
            todo &= _beyond(best[0], best[1], x, self.point.unconverged) & ~best[2]
        return best, calls

    def refine(self, est: ElementwiseEstimate, mask: torch.Tensor
               ) -> tuple[ElementwiseEstimate, int]:
        """A new estimate whose two-point elements under `mask` are extrapolated from four
        points, and how many were."""
        assert est.points is not None
        todo = mask.to(est.points.device).reshape(est.points.shape) & (est.points == 2)
        count = int(todo.sum())
        if not count:
            return est, 0
        new = self.estimate(est.name, 4, todo)
        rejected = est.rejected
        if new.rejected is not None:  # no extrapolation to bound the two-point estimate's
            # error: the element has no estimate it can be judged by
            rejected = new.rejected & todo if rejected is None else rejected | (new.rejected & todo)
        wide = todo.expand(self.point.out_shape)
        none = torch.zeros_like(todo)
        by_branch = {k: torch.where(todo, new.kink_by_branch.get(k, none),
                                    est.kink_by_branch.get(k, none))
                     for k in set(est.kink_by_branch) | set(new.kink_by_branch)}
        return replace(
            est, partial=torch.where(wide, new.partial, est.partial),
            error=torch.where(wide, new.error, est.error),
            kink=torch.where(todo, new.kink, est.kink),
            kink_by_branch={k: m for k, m in by_branch.items() if bool(m.any())},
            points=torch.where(todo, 4, est.points).to(torch.int8),
            forward_calls=est.forward_calls + new.forward_calls, rejected=rejected,
            why=est.why or new.why, noisy=_joined(est.noisy, new.noisy, todo),
            widened=est.widened + new.widened), count

    def _tolerant(self, name: str, x: torch.Tensor, h: torch.Tensor, points: int
                  ) -> tuple[list, torch.Tensor, TargetError | None, int]:
        """`_perturb_all`, where the target may reject some perturbed points: the elements
        it rejects are found by perturbing halves of the moving elements (the others held at
        step 0), each retried with smaller steps (REFINE_FACTOR, REFINE_FACTOR² times) that
        may stay inside its domain. (found, rejected mask, the first error, evaluations made
        of `points` calls each); past MAX_REJECTED · 4 failed evaluations the error is raised."""
        none = torch.zeros(x.shape, dtype=torch.bool, device=x.device)
        try:
            return self._perturb_all(name, x, h, points), none, None, 1
        except TargetError as exc:
            first = exc
        rejected, flat_h = none.reshape(-1).clone(), h.reshape(-1)
        moving = torch.nonzero(flat_h != 0).reshape(-1)
        todo = [(part, 1.0) for part in _halves(moving)]
        merged, tries, failures = None, 1, 1
        while todo:
            part, scale = todo.pop()
            mask = none.reshape(-1).clone()
            mask[part] = True
            mask = mask.reshape(x.shape)
            tries += 1
            try:
                found = self._perturb_all(name, x, torch.where(mask, h * scale, 0.0), points)
            except TargetError:
                failures += 1
                if failures > 4 * MAX_REJECTED:
                    raise first from None
                if len(part) > 1:
                    todo += [(p, scale) for p in _halves(part)]
                elif scale > REFINE_FACTOR ** -REFINE_ROUNDS:
                    todo.append((part, scale / REFINE_FACTOR))
                else:
                    rejected[part] = True
                continue
            merged = found if merged is None else _merged(merged, found, mask)
        if merged is None:  # nothing that moved was taken
            nan = torch.full(self.point.out_shape, float("nan"), dtype=self.point.dtype,
                             device=x.device)
            merged = [nan, nan.clone(), none.clone(), {}, torch.zeros_like(h)]
        return merged, rejected.reshape(x.shape), first, tries

    def _perturb_all(self, name: str, x: torch.Tensor, h: torch.Tensor, points: int) -> list:
        point = self.point
        outs, kinks = [], []
        fn = point.moving(name)
        for scale in STENCIL[:points]:
            vals = dict(point.values)
            vals[name] = torch.add(x, h, alpha=scale)
            out, branches = fn(vals)
            outs.append(out.expand(point.out_shape))
            kinks.append([branch_changed(b, b0)
                          for b, b0 in zip(branches, point.branches, strict=True)])
        wide_h = h.expand(point.out_shape)
        # (a two-point bound is round-off at eps·|f| only: f's measured noise, two more
        # evaluations of the whole target, is taken when a comparison doubts the estimate and
        # it is extrapolated from four new points; a smaller bound is only ever a reason to
        # look closer, never an `ok`)
        noise = point.noise() if points == 4 else 0.0
        est, err = estimate(outs, wide_h, point.machine_eps, noise)
        by_branch: dict[int, torch.Tensor] = {}
        for k in range(len(point.branches)):
            changed = kinks[0][k]
            for more in kinks[1:]:
                changed = changed | more[k]
            if bool(changed.any()):
                by_branch[k] = any_to_shape(changed, x.shape)
        kink = torch.zeros(x.shape, dtype=torch.bool, device=x.device)
        for mask in by_branch.values():
            kink |= mask
        if points == 4 and point.find_kinks:  # user code: no branch id reports its kinks
            found = kinked(point.out.expand(point.out_shape), outs, wide_h, point.machine_eps)
            kink |= any_to_shape(found & (h.expand(point.out_shape) > 0), x.shape)
        return [est, err, kink, by_branch, h]


def _retried(best: list, x: torch.Tensor, h: torch.Tensor, points: int,
             mask: torch.Tensor | None) -> torch.Tensor | None:
    """The elements worth a smaller step (their stencil crossed a kink, or an extrapolated
    estimate's error is large), None for none. (One pass says whether any stencil crossed a
    kink: usually none did.)"""
    retry = best[2] & (h != 0) if bool(best[2].any()) else None
    if points == 4:  # only an extrapolated estimate knows its truncation error
        beyond = _beyond(best[0], best[1], x, REFINE_ERROR)
        retry = beyond if retry is None else retry | beyond
    if retry is not None and mask is not None:
        retry = retry & mask
    return retry if retry is not None and bool(retry.any()) else None


def _joined(old: torch.Tensor | None, new: torch.Tensor | None, todo: torch.Tensor
            ) -> torch.Tensor | None:
    """A mask taken from `new` under `todo`, from `old` elsewhere (None: empty)."""
    if old is None and new is None:
        return None
    none = torch.zeros_like(todo)
    joined = torch.where(todo, none if new is None else new, none if old is None else old)
    return joined if bool(joined.any()) else None


def _halves(part: torch.Tensor) -> list[torch.Tensor]:
    half = len(part) // 2
    return [p for p in (part[:half], part[half:]) if len(p)]


def _merged(done: list, found: list, mask: torch.Tensor) -> list:
    """`done`, with the elements under `mask` (input-shaped) taken from `found`."""
    wide = mask.expand(done[0].shape)
    none = torch.zeros_like(mask)
    return [torch.where(wide, found[0], done[0]), torch.where(wide, found[1], done[1]),
            torch.where(mask, found[2], done[2]),
            {k: torch.where(mask, found[3].get(k, none), done[3].get(k, none))
             for k in set(done[3]) | set(found[3])},
            torch.where(mask, found[4], done[4])]


def _better(best: list, found: list, x: torch.Tensor, refused: torch.Tensor | None = None
            ) -> list:
    """Per input element the trustworthy estimate: off-kink first, then the one with the
    smaller error; never one whose points the target `refused`. (A list: estimate, error,
    kink, kink by branch, the step each element's estimate was made with.)"""
    est, err, kink, by_branch, step = found
    old_err = sum_to_shape(best[1], x.shape)
    new_err = sum_to_shape(err, x.shape)
    better = ~kink & (best[2] | (new_err < old_err))
    if refused is not None:
        better &= ~refused
    wide = better.expand(est.shape)
    return [torch.where(wide, est, best[0]), torch.where(wide, err, best[1]),
            torch.where(better, kink, best[2]),
            {k: torch.where(better, by_branch.get(k, torch.zeros_like(better)),
                            best[3].get(k, torch.zeros_like(better)))
             for k in set(best[3]) | set(by_branch)},
            torch.where(better, step, best[4])]


def _beyond(est: torch.Tensor, err: torch.Tensor, x: torch.Tensor, limit: float
            ) -> torch.Tensor:
    """Input-shaped: elements whose error bound is above `limit` relative to the estimate
    (REFINE_ERROR: worth refining; Point.unconverged: not converged at any step tried)."""
    bad = (err > limit * (est.abs() + 1)) & torch.isfinite(est)
    return any_to_shape(bad, x.shape)
