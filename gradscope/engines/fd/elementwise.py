"""Elementwise inputs: each output element depends on at most one element of the input (the
target declares it, or probing found it), so every element is perturbed at once: two forward
calls a round (four for an extrapolated estimate), retried with smaller steps where a stencil
crosses a kink."""

from __future__ import annotations

import torch

from gradscope.engines.fd.result import Estimate
from gradscope.engines.fd.stencil import (
    REFINE_ERROR,
    REFINE_FACTOR,
    REFINE_ROUNDS,
    STENCIL,
    UNCONVERGED,
    estimate,
)
from gradscope.tensors import any_to_shape, branch_changed, sum_to_shape


class ElementwiseDifferences:
    """The elementwise half of `FiniteDifferences` (which provides values, steps and `_fn`)."""

    # ------------------------------------------------------------ elementwise: 2 calls a round
    def _elementwise(self, name: str, points: int, mask: torch.Tensor | None = None
                     ) -> Estimate:
        """Every element perturbed at once: `points` forward calls a round (with `mask`, only
        the elements `refine` asked for)."""
        x = self.values[name]
        h = self.step(name)
        if mask is not None:
            h = torch.where(mask, h, 0.0)  # only the masked elements move (others come out NaN)
        calls = 0
        best = None
        for round_ in range(REFINE_ROUNDS + 1):
            est, err, kink, by_branch = self._perturb_all(name, x, h, points)
            calls += points
            if best is None:
                best = [est, err, kink, by_branch]
            else:
                # Per input element keep the trustworthy estimate: off-kink first, then the one
                # with the smaller error.
                old_err = sum_to_shape(best[1], x.shape)
                new_err = sum_to_shape(err, x.shape)
                better = ~kink & (best[2] | (new_err < old_err))
                wide = better.expand(self.out_shape)
                best[0] = torch.where(wide, est, best[0])
                best[1] = torch.where(wide, err, best[1])
                best[2] = torch.where(better, kink, best[2])
                best[3] = {k: torch.where(better, by_branch.get(k, torch.zeros_like(better)),
                                          best[3].get(k, torch.zeros_like(better)))
                           for k in set(best[3]) | set(by_branch)}
            retry = best[2]
            if points == 4:  # only an extrapolated estimate knows its truncation error
                retry = retry | self._needs_refinement(best[0], best[1], x)
            if mask is not None:
                retry = retry & mask
            if round_ == REFINE_ROUNDS or not bool(retry.any()):
                break
            h = torch.where(retry, h / REFINE_FACTOR, h)
        est, err, kink, by_branch = best  # type: ignore[misc]
        if points == 4:
            kink = kink | self._unconverged(est, err, x)
        col = Estimate(name, "elementwise", tuple(x.shape), self.out_shape, est, err, kink,
                      {k: m for k, m in by_branch.items() if bool(m.any())}, calls)
        col.points = torch.full(x.shape, points, dtype=torch.int8, device=x.device)
        return col

    def _refine_elementwise(self, col: Estimate, todo: torch.Tensor) -> None:
        new = self._elementwise(col.name, 4, todo)
        wide = todo.expand(self.out_shape)
        col.partial = torch.where(wide, new.partial, col.partial)
        col.error = torch.where(wide, new.error, col.error)
        col.kink = torch.where(todo, new.kink, col.kink)
        none = torch.zeros_like(todo)
        by_branch = {k: torch.where(todo, new.kink_by_branch.get(k, none),
                                    col.kink_by_branch.get(k, none))
                     for k in set(col.kink_by_branch) | set(new.kink_by_branch)}
        col.kink_by_branch = {k: m for k, m in by_branch.items() if bool(m.any())}
        col.points = torch.where(todo, 4, col.points).to(torch.int8)
        col.forward_calls += new.forward_calls

    def _needs_refinement(self, est: torch.Tensor, err: torch.Tensor,
                          x: torch.Tensor) -> torch.Tensor:
        bad = (err > REFINE_ERROR * (est.abs() + 1)) & torch.isfinite(est)
        return any_to_shape(bad, x.shape)

    def _unconverged(self, est: torch.Tensor, err: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        bad = (err > UNCONVERGED * (est.abs() + 1)) & torch.isfinite(est)
        return any_to_shape(bad, x.shape)

    def _perturb_all(self, name: str, x: torch.Tensor, h: torch.Tensor, points: int):
        outs, kinks = [], []
        fn = self._fn(name)
        for scale in STENCIL[:points]:
            vals = dict(self.values)
            vals[name] = torch.add(x, h, alpha=scale)
            out, branches = fn(vals)
            outs.append(out.expand(self.out_shape))
            kinks.append([branch_changed(b, b0)
                          for b, b0 in zip(branches, self.branches, strict=True)])
        est, err = estimate(outs, h.expand(self.out_shape), self.machine_eps)
        by_branch: dict[int, torch.Tensor] = {}
        for k in range(len(self.branches)):
            changed = kinks[0][k]
            for more in kinks[1:]:
                changed = changed | more[k]
            if bool(changed.any()):
                by_branch[k] = any_to_shape(changed, x.shape)
        kink = torch.zeros(x.shape, dtype=torch.bool, device=x.device)
        for mask in by_branch.values():
            kink |= mask
        return est, err, kink, by_branch
