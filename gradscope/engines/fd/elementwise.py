"""Elementwise inputs: each output element depends on at most one element of the input (the
target declares it, or probing found it), so every element is perturbed at once: two forward
calls a round (four for an extrapolated estimate), retried with smaller steps where a stencil
crosses a kink. `refine` makes a new estimate with the doubted elements extrapolated."""

from __future__ import annotations

from dataclasses import replace

import torch

from gradscope.engines.fd.point import Point
from gradscope.engines.fd.result import ElementwiseEstimate
from gradscope.engines.fd.stencil import (
    REFINE_ERROR,
    REFINE_FACTOR,
    REFINE_ROUNDS,
    STENCIL,
    UNCONVERGED,
    estimate,
    kinked,
)
from gradscope.tensors import any_to_shape, branch_changed, sum_to_shape


class ElementwiseEstimator:
    def __init__(self, point: Point) -> None:
        self.point = point

    def estimate(self, name: str, points: int, mask: torch.Tensor | None = None
                 ) -> ElementwiseEstimate:
        """Every element perturbed at once: `points` forward calls a round (with `mask`, only
        the elements `refine` asked for)."""
        x = self.point.values[name]
        h = self.point.step(name)
        if mask is not None:
            h = torch.where(mask, h, 0.0)  # only the masked elements move (others come out NaN)
        calls = 0
        best: list | None = None
        for round_ in range(REFINE_ROUNDS + 1):
            found = self._perturb_all(name, x, h, points)
            calls += points
            best = found if best is None else _better(best, found, x)
            retry = best[2]
            if points == 4:  # only an extrapolated estimate knows its truncation error
                retry = retry | _beyond(best[0], best[1], x, REFINE_ERROR)
            if mask is not None:
                retry = retry & mask
            if round_ == REFINE_ROUNDS or not bool(retry.any()):
                break
            h = torch.where(retry, h / REFINE_FACTOR, h)
        assert best is not None
        est, err, kink, by_branch = best
        if points == 4:
            kink = kink | _beyond(est, err, x, UNCONVERGED)
        return ElementwiseEstimate(
            name, tuple(x.shape), self.point.out_shape, est, err, kink,
            {k: m for k, m in by_branch.items() if bool(m.any())}, calls,
            points=torch.full(x.shape, points, dtype=torch.int8, device=x.device))

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
            forward_calls=est.forward_calls + new.forward_calls), count

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
        est, err = estimate(outs, wide_h, point.machine_eps, point.noise())
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
        return [est, err, kink, by_branch]


def _better(best: list, found: list, x: torch.Tensor) -> list:
    """Per input element the trustworthy estimate: off-kink first, then the one with the
    smaller error."""
    est, err, kink, by_branch = found
    old_err = sum_to_shape(best[1], x.shape)
    new_err = sum_to_shape(err, x.shape)
    better = ~kink & (best[2] | (new_err < old_err))
    wide = better.expand(est.shape)
    return [torch.where(wide, est, best[0]), torch.where(wide, err, best[1]),
            torch.where(better, kink, best[2]),
            {k: torch.where(better, by_branch.get(k, torch.zeros_like(better)),
                            best[3].get(k, torch.zeros_like(better)))
             for k in set(best[3]) | set(by_branch)}]


def _beyond(est: torch.Tensor, err: torch.Tensor, x: torch.Tensor, limit: float
            ) -> torch.Tensor:
    """Input-shaped: elements whose error bound is above `limit` relative to the estimate
    (REFINE_ERROR: worth refining; UNCONVERGED: not converged at any step tried)."""
    bad = (err > limit * (est.abs() + 1)) & torch.isfinite(est)
    return any_to_shape(bad, x.shape)
