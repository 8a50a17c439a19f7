"""The per-element verdict when autograd is laid beside the reference engines' answers.

An element is `undefined` when any engine (or the function itself, in the finite-difference
stencil) is not finite there; `nondifferentiable` when a reference's answer there is no
derivative (its stencil straddles a kink, jump or pole); `mismatch` when autograd differs from
a reference by more than `atol + rtol·|reference|` (plus FD_ERROR_FACTOR × the reference's own
error bound, where it is an estimate); otherwise `ok`. A reference that answered only some
elements (a sample) judges those; the others rest on the other references, or are `unchecked`
when there is none. A named check (a random upstream, the full Jacobian) sums its inputs'
comparisons up as one `NamedCheck` (`named`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace

import torch

from gradscope.compare.tolerance import FD_ERROR_FACTOR, Tolerance
from gradscope.engines.base import Answer
from gradscope.report.model import NamedCheck
from gradscope.report.status import (
    ELEMENT,
    MISMATCH,
    NONDIFFERENTIABLE,
    OK,
    SEVERITY,
    UNCHECKED,
    UNDEFINED,
    VANISHING,
    Status,
    worst,
)
from gradscope.tensors import all_finite

# a sample covering less than 1/SPARSE of a tensor is judged at its own elements only
SPARSE = 8


@dataclass(frozen=True)
class Excuse:
    """Elements of a comparison a feature re-marked: `where` (a bool mask shaped like its
    statuses), the status they now have (`surrogate`: a mismatch the evidence or the user
    explains; `mismatch`: a kink's excuse withdrawn) and `by`, the feature that said so (set
    by the judge stage, which also knows whether the feature speaks for the user)."""

    where: torch.Tensor
    status: Status
    by: str = ""


@dataclass(frozen=True)
class Comparison:
    status: torch.Tensor  # int8 codes (Status.code), shaped like the compared arrays
    error: torch.Tensor  # |autograd − reference|, the larger over the references present
    # who re-marked what, in order: the raw comparison has none
    excuses: tuple[Excuse, ...] = ()
    # count per status code, computed once when first asked (one pass serves counts(),
    # worst() and max_abs_error()); a memo, not state: it follows from `status`
    hist: list[int] | None = field(default=None, repr=False, compare=False)

    def _histogram(self) -> list[int]:
        if self.hist is None:
            codes = self.status.reshape(-1).to(torch.int64)
            object.__setattr__(self, "hist",
                               torch.bincount(codes, minlength=len(ELEMENT)).tolist())
        assert self.hist is not None
        return self.hist

    def counts(self) -> dict[str, int]:
        hist = self._histogram()
        return {s.value: hist[s.code] for s in ELEMENT if hist[s.code]}

    def has(self, status: Status) -> bool:
        return bool(self._histogram()[status.code])

    def compared(self) -> bool:
        """Whether an engine judged any element (ok, mismatch, surrogate, vanishing), as
        opposed to all of them unchecked, undefined or at a kink."""
        hist = self._histogram()
        return any(hist[s.code] for s in ELEMENT if s.compared)

    def worst(self) -> Status:
        hist = self._histogram()
        return next((s for s in SEVERITY if hist[s.code]), Status.OK)

    def excused(self, where: torch.Tensor, status: Status,
                error: torch.Tensor | None = None) -> Comparison:
        """The elements under `where` re-marked `status` (their errors `error` where given),
        the excuse recorded; itself where `where` holds no element."""
        if not bool(where.any()):
            return self
        excuse = Excuse(where, status)
        return Comparison(self.status.masked_fill(where, status.code),
                          self.error if error is None else error,
                          (*self.excuses, excuse))

    def by(self, feature: str, since: int) -> Comparison:
        """The excuses recorded after the first `since` said to be `feature`'s."""
        if len(self.excuses) == since:
            return self
        mine = tuple(replace(e, by=feature) for e in self.excuses[since:])
        return replace(self, excuses=(*self.excuses[:since], *mine), hist=self.hist)

    def surrogate(self, where: torch.Tensor) -> Comparison:
        """Re-mark as `surrogate` the mismatches under `where` (broadcast to the statuses):
        the forward is flat there (a straight-through estimator, a spiking surrogate) or the
        user declared the gradient a surrogate."""
        at = (self.status == MISMATCH) & where.to(self.status.device).expand(self.status.shape)
        return self.excused(at, Status.SURROGATE)

    def at_kink(self, flat: torch.Tensor, beyond: torch.Tensor) -> Comparison:
        """Re-mark as `mismatch` the kink elements at these flat positions, whose autograd
        value lies `beyond` the one-sided derivatives there (features/subgradients.py): the
        kink's excuse withdrawn."""
        error = self.error.clone()
        flat = flat.to(self.status.device)
        kinked = self.status.view(-1)[flat] == NONDIFFERENTIABLE
        at = torch.zeros(self.status.numel(), dtype=torch.bool, device=self.status.device)
        at[flat[kinked]] = True
        error.view(-1)[flat[kinked]] = beyond.to(error.device, error.dtype)[
            kinked.to(beyond.device)]
        return self.excused(at.view(self.status.shape), Status.MISMATCH, error)

    def vanishing(self, autograd: torch.Tensor) -> Comparison:
        """Re-mark as `vanishing` the `ok` elements whose gradient is exactly zero: a vanishing
        op (round, floor, ...) lies between them and the output. A label of agreements, not an
        excuse: nothing is recorded (no mask of a model's size kept)."""
        status = self.status.clone()
        status[(status == OK) & (autograd.to(status.device) == 0)] = VANISHING
        return Comparison(status, self.error, self.excuses)

    def surrogate_by(self, features: Collection[str]) -> torch.Tensor | None:
        """The elements `features` excused as a surrogate (None: none)."""
        masks = [e.where for e in self.excuses
                 if e.status == Status.SURROGATE and e.by in features]
        return functools.reduce(torch.logical_or, masks) if masks else None

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

    def reshaped(self, shape: Sequence[int]) -> Comparison:
        return Comparison(self.status.reshape(tuple(shape)), self.error.reshape(tuple(shape)),
                          tuple(replace(e, where=e.where.reshape(tuple(shape)))
                                for e in self.excuses), self.hist)


def compare(autograd: torch.Tensor, answers: Sequence[Answer], tol: Tolerance,
            kink: torch.Tensor | None = None) -> Comparison:
    """Per-element status of `autograd` against the references' answers (none: every
    element `unchecked`, never `ok`). `kink`: where the forward itself has a kink, jump or
    pole (as finite differences found it), whichever references judge the view."""
    if kink is not None and answers:  # (nothing compared: unchecked, kink or not)
        answers = [Answer(a.values, a.error, kink if a.kink is None else a.kink | kink,
                          a.checked) for a in answers]
    partial = next((a for a in answers if a.checked is not None), None)
    if partial is None:
        return _compare(autograd, answers, tol)
    others = [a for a in answers if a is not partial]
    checked = partial.checked.to(autograd.device)  # type: ignore[union-attr]
    if not bool(checked.any()):  # an empty sample (nothing of it is judged: unchecked where
        return _compare(autograd, others, tol)  # no other answer is), no model-sized copies
    if not others:
        at = checked.reshape(-1).nonzero().flatten()
        if at.numel() * SPARSE < checked.numel():
            return _sampled(autograd, partial, at, tol)
    masked = Answer(torch.where(checked, partial.values.to(autograd.device), 0.0),
                    torch.where(checked, partial.error.to(autograd.device), 0.0)
                    if partial.error is not None else None, partial.kink)
    within = _compare(autograd, [*others, masked], tol)
    # (outside the sample with no other answer, `outside` is unchecked, undefined where
    # autograd is)
    outside = _compare(autograd, others, tol)
    status = torch.where(checked, within.status, outside.status)
    return Comparison(status, torch.where(checked, within.error, outside.error))


def _sampled(autograd: torch.Tensor, sample: Answer, at: torch.Tensor, tol: Tolerance
             ) -> Comparison:
    """A sample of a few elements (the flat indices `at`) judged at those elements alone,
    every other one unchecked: the comparison's float64 temporaries are the sample's size,
    not a model tensor's (an embedding of 65M elements: gigabytes)."""
    shape = tuple(autograd.shape)
    where = torch.unravel_index(at, shape) if shape else ()

    def picked(t: torch.Tensor | None) -> torch.Tensor | None:
        return None if t is None else t.to(autograd.device).expand(shape)[where]

    within = _compare(picked(autograd.detach()),  # type: ignore[arg-type]
                      [Answer(picked(sample.values), picked(sample.error),  # type: ignore
                              picked(sample.kink))], tol)
    outside = _compare(autograd, [], tol)
    status = outside.status  # (a tensor of its own)
    status[where] = within.status
    error = torch.zeros(shape, dtype=torch.float64, device=autograd.device)
    error[where] = within.error
    return Comparison(status, error)


def _compare(autograd: torch.Tensor, answers: Sequence[Answer], tol: Tolerance) -> Comparison:
    ag = autograd.detach().to(torch.float64)
    if not answers:  # nothing was checked: say so rather than `ok`
        status = torch.full(ag.shape, UNCHECKED, dtype=torch.int8, device=ag.device)
        status.masked_fill_(~torch.isfinite(ag), UNDEFINED)
        # (one zero, broadcast: a model's tensor holds no copy of itself for nothing)
        return Comparison(status, torch.zeros((), dtype=ag.dtype, device=ag.device)
                          .expand(ag.shape))
    # This runs a dozen times per check on tensors of up to millions of elements, so it is
    # written in few passes, each into a buffer reused across answers (`out=`): the margin
    # diff − rtol·|ref| − k·err is over atol exactly where an element mismatches, and its
    # maximum is finite only if every difference is (a NaN or an infinity sends us the exact
    # way); no pass of its own tells whether any element is over.
    error: torch.Tensor | None = None
    bad: torch.Tensor | None = None  # None: no element is over its limit
    defined: torch.Tensor | None = None  # None: every element is defined
    kink: torch.Tensor | None = None
    scratch: torch.Tensor | None = None  # |ag − ref| of the second answer on
    for answer in answers:
        ref = answer.values.detach().to(ag.device, torch.float64)
        diff = _difference(ag, ref, error, scratch)
        if error is not None and diff.shape == error.shape:  # (the buffer _difference used)
            scratch = diff
        atol = tol.atol_for(ref)
        # every difference within atol (and finite) is every element within its limit: the
        # margin's three passes are for answers with a difference beyond it (an estimate's)
        top = float(diff.max()) if diff.numel() else 0.0
        if not top <= atol:
            margin = _margin(diff, ref, answer, tol)
            top = float(margin.max()) if margin.numel() else 0.0
            if not top <= atol:  # (NaN too: look at the elements, the max cannot say)
                over = margin > atol  # NaN compares False: such elements become `undefined`
                bad = over if bad is None else bad.logical_or_(over)
        if not math.isfinite(top):
            ok = torch.isfinite(diff)
            if not bool(ok.all()):
                defined = ok if defined is None else defined.logical_and_(ok)
                diff.masked_fill_(~ok, 0.0)
        if error is None:
            error = diff
        elif diff.shape == error.shape:
            torch.maximum(error, diff, out=error)
        else:
            error = torch.maximum(error, diff)
        if answer.kink is not None:
            kink = answer.kink if kink is None else kink | answer.kink
    assert error is not None
    return _statuses(ag, error, bad, kink, defined)


def _statuses(ag: torch.Tensor, error: torch.Tensor, bad: torch.Tensor | None,
              kink: torch.Tensor | None, defined: torch.Tensor | None) -> Comparison:
    """The comparison: `ok`, then mismatches, kinks and undefined elements marked over it."""
    status = torch.full(ag.shape, OK, dtype=torch.int8, device=ag.device)
    uniform = True
    if bad is not None:
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
    hist = None
    if uniform:  # every element ok: the histogram is known without a pass
        hist = [0] * len(ELEMENT)
        hist[OK] = status.numel()
    return Comparison(status, error, hist=hist)


def _difference(ag: torch.Tensor, ref: torch.Tensor, first: torch.Tensor | None,
                scratch: torch.Tensor | None) -> torch.Tensor:
    """|ag − ref|: a tensor of its own for the first answer (it becomes the error), the
    scratch buffer for the others."""
    shape = torch.broadcast_shapes(ag.shape, ref.shape)
    if first is None or shape != first.shape:
        return torch.sub(ag, ref).abs_()
    out = torch.empty_like(first) if scratch is None else scratch
    return torch.sub(ag, ref, out=out).abs_()


def _margin(diff: torch.Tensor, ref: torch.Tensor, answer: Answer, tol: Tolerance
            ) -> torch.Tensor:
    """diff − rtol·|ref| − FD_ERROR_FACTOR·error, in one new buffer."""
    limit = torch.abs(ref)
    if limit.shape == diff.shape:
        margin = torch.sub(diff, limit, alpha=tol.rtol, out=limit)
    else:
        margin = torch.sub(diff, limit, alpha=tol.rtol)
    if answer.error is not None:
        err = answer.error.to(diff.device, torch.float64)
        if torch.broadcast_shapes(margin.shape, err.shape) == margin.shape:
            margin.sub_(err, alpha=FD_ERROR_FACTOR)
        else:
            margin = margin - FD_ERROR_FACTOR * err
    return margin


def undefined_alone(cmp: Comparison, autograd: torch.Tensor, answers: Sequence[Answer],
                     kink: torch.Tensor | None) -> Comparison:
    """Elements where autograd alone is NaN or infinite — every reference that answers the
    whole view finite there, no kink — are mismatches, not `undefined`: a backward that
    gave numbers on the table's call and NaN on this one is wrong on this call."""
    if not cmp.has(Status.UNDEFINED) or all_finite(autograd.detach()):
        return cmp
    whole = [a for a in answers if a.checked is None]
    if not whole:
        return cmp
    alone = ~torch.isfinite(autograd.detach()).reshape(cmp.status.shape)
    for answer in whole:
        alone &= torch.isfinite(answer.values.to(alone.device)).expand(alone.shape)
    if kink is not None:
        alone &= ~kink.to(alone.device).expand(alone.shape)
    if not bool(alone.any()):
        return cmp
    return Comparison(cmp.status.masked_fill(alone, MISMATCH), cmp.error)


def named(label: str, cmps: Mapping[str, Comparison]) -> NamedCheck:
    """The named check `label` over its inputs' comparisons: passing when no element
    mismatches, `not run` where no engine compared anything."""
    mismatches = sum(c.counts().get(Status.MISMATCH, 0) for c in cmps.values())
    largest = max((c.max_abs_error() for c in cmps.values()), default=0.0)
    statuses = {n: c.worst() if c.compared() else Status.NOT_RUN for n, c in cmps.items()}
    ran = [s for s in statuses.values() if s != Status.NOT_RUN]
    result = worst(ran) if ran else Status.NOT_RUN
    return NamedCheck(label, result, largest, mismatches, statuses)
