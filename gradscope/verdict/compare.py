"""The per-element verdict when the engines are laid side by side.

An element is `undefined` when any engine (or the function itself, in the finite-difference
stencil) is not finite there; `nondifferentiable` when its finite-difference stencil straddles
a kink, jump or pole; `mismatch` when autograd differs from the symbolic result or from the
finite-difference estimate by more than `atol + rtol·|reference|` (plus the finite-difference
error estimate); otherwise `ok`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from gradscope.report.status import (
    COMPARED,
    MISMATCH,
    NONDIFFERENTIABLE,
    OK,
    SEVERITY,
    STATUS_NAMES,
    SURROGATE,
    UNCHECKED,
    UNDEFINED,
    VANISHING,
)
from gradscope.verdict.tolerance import FD_ERROR_FACTOR, Tolerance


@dataclass
class Comparison:
    status: torch.Tensor  # int8 codes, shaped like the compared arrays
    error: torch.Tensor  # |autograd − reference|, the larger over the references present
    hist: list[int] | None = field(default=None, repr=False)  # count per status code

    def _histogram(self) -> list[int]:
        # one pass over the statuses serves counts(), worst() and max_abs_error()
        if self.hist is None:
            codes = self.status.reshape(-1).to(torch.int64)
            self.hist = torch.bincount(codes, minlength=len(STATUS_NAMES)).tolist()
        return self.hist

    def counts(self) -> dict[str, int]:
        hist = self._histogram()
        return {STATUS_NAMES[c]: hist[c] for c in STATUS_NAMES if hist[c]}

    def compared(self) -> bool:
        """Whether an engine judged any element (ok, mismatch, surrogate, vanishing), as
        opposed to all of them unchecked, undefined or at a kink."""
        counts = self.counts()
        return any(counts.get(s) for s in COMPARED)

    def worst(self) -> str:
        hist = self._histogram()
        for code in SEVERITY:
            if hist[code]:
                return STATUS_NAMES[code]
        return "ok"

    def surrogate(self, where: torch.Tensor) -> Comparison:
        """Re-mark as `surrogate` the mismatches under `where` (broadcast to the statuses):
        the caller found the forward flat there (a straight-through estimator, a spiking
        surrogate) or the user declared the gradient a surrogate."""
        status = self.status.clone()
        status[(status == MISMATCH) & where.to(status.device).expand(status.shape)] = SURROGATE
        return Comparison(status, self.error)

    def vanishing(self, autograd: torch.Tensor) -> Comparison:
        """Re-mark as `vanishing` the `ok` elements whose gradient is exactly zero: the caller
        has found a vanishing op (round, floor, ...) between them and the output."""
        status = self.status.clone()
        status[(status == OK) & (autograd.to(status.device) == 0)] = VANISHING
        return Comparison(status, self.error)

    def max_abs_error(self) -> float:
        """Largest error over the elements that were judged (not kinks, not undefined)."""
        if self.error.numel() == 0:
            return 0.0
        hist = self._histogram()
        if not (hist[NONDIFFERENTIABLE] or hist[UNDEFINED] or hist[UNCHECKED]):
            return float(self.error.max())
        skipped = (self.status == NONDIFFERENTIABLE) | (self.status == UNDEFINED) | (
            self.status == UNCHECKED)
        return float(torch.where(skipped, 0.0, self.error).max())


def compare(autograd: torch.Tensor, symbolic: torch.Tensor | None,
            finite: torch.Tensor | None, finite_error: torch.Tensor | None,
            kink: torch.Tensor | None, tol: Tolerance,
            checked: torch.Tensor | None = None) -> Comparison:
    """Per-element status of `autograd` against the engines that ran (None = did not run).
    `checked` masks the elements finite differences estimated (a sampled input)."""
    if checked is not None and finite is not None:
        return _compare_sampled(autograd, symbolic, finite, finite_error, kink, tol, checked)
    ag = autograd.detach().to(torch.float64)
    references = [(r, s) for r, s in ((symbolic, None), (finite, finite_error)) if r is not None]
    if not references:  # nothing was checked: say so rather than `ok`
        status = torch.full(ag.shape, UNCHECKED, dtype=torch.int8, device=ag.device)
        status.masked_fill_(~torch.isfinite(ag), UNDEFINED)
        return Comparison(status, torch.zeros_like(ag))
    # This runs a dozen times per check on tensors of up to millions of elements, so it is
    # written in few passes: a difference is finite exactly when both sides are, and one sum
    # tells whether all differences are (an overflowing sum only sends us the exact way).
    error: torch.Tensor | None = None
    bad: torch.Tensor | None = None
    defined: torch.Tensor | None = None  # None: every element is defined
    for reference, slack in references:
        ref = reference.to(ag.device, torch.float64)
        diff = torch.sub(ag, ref).abs_()
        limit = ref.abs().mul_(tol.rtol).add_(tol.atol)
        if slack is not None:
            limit.add_(slack.to(ag.device, torch.float64), alpha=FD_ERROR_FACTOR)
        over = diff > limit  # NaN compares False; such elements become `undefined` below
        bad = over if bad is None else bad.logical_or_(over)
        if not math.isfinite(float(diff.sum())):
            ok = torch.isfinite(diff)
            defined = ok if defined is None else defined.logical_and_(ok)
            diff.masked_fill_(~ok, 0.0)
        error = diff if error is None else torch.maximum(error, diff, out=error)
    assert error is not None and bad is not None
    status = torch.full(ag.shape, OK, dtype=torch.int8, device=ag.device)
    uniform = True
    if bool(bad.any()):
        status.masked_fill_(bad, MISMATCH)
        uniform = False
    if kink is not None:
        kink = kink.to(ag.device).expand(ag.shape)
        if bool(kink.any()):
            status.masked_fill_(kink, NONDIFFERENTIABLE)
            uniform = False
    if defined is not None:
        status.masked_fill_(~defined, UNDEFINED)
        uniform = False
    cmp = Comparison(status, error)
    if uniform:  # every element ok: the histogram is known without a pass
        cmp.hist = [0] * len(STATUS_NAMES)
        cmp.hist[OK] = status.numel()
    return cmp


def _compare_sampled(autograd: torch.Tensor, symbolic: torch.Tensor | None,
                     finite: torch.Tensor, finite_error: torch.Tensor | None,
                     kink: torch.Tensor | None, tol: Tolerance,
                     checked: torch.Tensor) -> Comparison:
    """Finite differences judge the sampled elements; the others rest on the symbolic engine,
    or are `unchecked` when there is none (their NaN estimate is not 'undefined')."""
    checked = checked.to(autograd.device)
    fd = torch.where(checked, finite.to(autograd.device), 0.0)
    err = torch.where(checked, finite_error.to(autograd.device), 0.0) \
        if finite_error is not None else None
    with_fd = compare(autograd, symbolic, fd, err, kink, tol)
    without = compare(autograd, symbolic, None, None, None, tol)
    status = torch.where(checked, with_fd.status, without.status)
    if symbolic is None:
        ag_defined = torch.isfinite(autograd.detach())
        status = torch.where(checked, status, torch.where(ag_defined, UNCHECKED, UNDEFINED)
                             .to(status.dtype))
    error = torch.where(checked, with_fd.error, without.error)
    return Comparison(status, error)
