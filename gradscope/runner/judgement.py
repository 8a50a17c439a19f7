"""The verdict stage: each view's raw comparison with the features' excuses applied, in the
order gradscope/features/base.py gives (what the evidence explains — torch's documented
departures, a step's surrogate — then what the user declared, then labels of agreements such as
`vanishing`), each input's status (and what a feature's own evidence decides of it), the named
checks (random upstreams, the full Jacobian, then each feature's), forward mode and
accumulation, and the list of failures that decides the run: `passed = not failures`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import torch

from gradscope import features as registry
from gradscope.compare import outcome
from gradscope.compare.elements import Comparison, compare, named
from gradscope.engines.base import estimated
from gradscope.evidence.gather import Evidence, View
from gradscope.evidence.prepare import Prepared
from gradscope.features import Context, Guard, Interim
from gradscope.report.model import Failure, NamedCheck
from gradscope.report.status import FAILING_KINDS, Status
from gradscope.runner import failed
from gradscope.runner.excuses import Excuses


@dataclass(frozen=True)
class FirstMismatch:
    """The first comparison of an input that had a mismatch before a declaration excused it
    (the table's, else a random upstream's, else the Jacobian's): autograd, its reference
    (an exact one where it ran, with the reference's error bound) and the statuses. What the
    relations between autograd and the derivative are read from."""

    name: str
    autograd: torch.Tensor
    reference: torch.Tensor | None
    error: torch.Tensor | None
    comparison: Comparison
    jacobian: bool


@dataclass(frozen=True)
class Verdict:
    table: dict[str, Comparison] = field(default_factory=dict)  # per input, excused
    statuses: dict[str, Status] = field(default_factory=dict)  # per input
    checks: tuple[NamedCheck, ...] = ()
    forward: Comparison | None = None
    forward_status: Status | None = None
    accumulation_ok: bool | None = None
    surrogate_elements: dict[str, torch.Tensor] = field(default_factory=dict)
    seen: dict[str, FirstMismatch] = field(default_factory=dict)
    failures: tuple[Failure, ...] = ()
    aside: dict[str, str] = field(default_factory=dict)  # features that stepped aside: why


def judge(prepared: Prepared, evidence: Evidence, excuses: Excuses) -> Verdict:
    if evidence.table is None:
        return _failed_backward(prepared, evidence, excuses)
    ctx, guard = excuses.context(prepared, evidence), Guard(registry.FEATURES, excuses.aside)
    seen: dict[str, FirstMismatch] = {}
    surrogate: dict[str, torch.Tensor] = {}
    shapes = {n: tuple(t.shape) for n, t in prepared.bound.cast.items()}
    judged = [{n: _excused(guard, ctx, n, view, seen, surrogate, shapes[n]) for n in view.raw}
              for view in evidence.views]
    table = judged[0]
    statuses = {n: _status(c) for n, c in table.items()}
    unjudged = {**_unjudged(evidence, table),  # (engines that ran but met only NaN: said so)
                **{n: UNDEFINED_EVERYWHERE for n, s in statuses.items()
                   if s == Status.INCONCLUSIVE and not table[n].has(Status.UNCHECKED)}}
    for feature in guard.active:
        statuses, why = guard.call(feature, feature.statuses, (statuses, {}), ctx, statuses)
        unjudged.update(why)
    findings = [d for feature in guard.active
                for d in guard.call(feature, feature.target_checks, (), ctx)]
    otherwise = any(d.kind in FAILING_KINDS for d in findings) or bool(
        outcome.nonfinite_failures(evidence.nonfinite, prepared.options.allow_nan))
    checks = [named(view.label, cmps)
              for view, cmps in zip(evidence.views[1:], judged[1:], strict=True)]
    for feature in guard.active:
        checks += guard.call(feature, feature.checks, [], ctx,
                             Interim(statuses, tuple(checks), surrogate, otherwise))
    forward, forward_status = _forward(evidence)
    acc = _accumulation(evidence)
    failures = outcome.failures(
        statuses=statuses, mismatches={n: c.counts().get(Status.MISMATCH, 0)
                                      for n, c in table.items()},
        unjudged=unjudged, findings=findings, checks=checks,
        forward=forward_status, nonfinite=evidence.nonfinite,
        allow_nan=prepared.options.allow_nan)
    return Verdict(table, statuses, tuple(checks), forward, forward_status, acc, surrogate, seen,
                   tuple(failures), guard.aside)


def _excused(guard: Guard, ctx: Context, name: str, view: View, seen: dict[str, FirstMismatch],
             surrogate: dict[str, torch.Tensor], shape: tuple[int, ...]) -> Comparison:
    """One input's raw comparison in one view, with the features' excuses applied and
    recorded (`Comparison.excuses`, each by its feature): what the evidence explains, then (the
    first mismatch still standing kept for the relations) what the user declared, then the
    labels of agreements. The elements excused as a surrogate by a feature that speaks for the
    user (a step's surrogate, a declaration; not torch's departure) are the user's surrogate."""
    cmp = _applied(guard, ctx, name, view, view.raw[name], "explain")
    if cmp.has(Status.MISMATCH) and name not in seen:
        reference = view.reference(name)
        seen[name] = FirstMismatch(name, view.autograd[name],
                                   reference.values if reference else None,
                                   reference.error if reference else None, cmp, view.jacobian)
    cmp = _applied(guard, ctx, name, view, cmp, "declared")
    users = cmp.surrogate_by({f.name for f in guard.active if f.users})
    if users is not None:
        marked = view.elements(users.cpu(), shape)
        before = surrogate.get(name)
        surrogate[name] = marked if before is None else before | marked
    return _applied(guard, ctx, name, view, cmp, "relabel")


def _applied(guard: Guard, ctx: Context, name: str, view: View, cmp: Comparison,
             hook: str) -> Comparison:
    """`cmp` through every active feature's `hook`, each excuse recorded as its feature's."""
    for feature in guard.active:
        since = len(cmp.excuses)
        cmp = guard.call(feature, getattr(feature, hook), cmp, ctx, name, view, cmp).by(
            feature.name, since)
    return cmp


def _unjudged(evidence: Evidence, table: Mapping[str, Comparison]) -> dict[str, str]:
    """Why no engine compared an input: the last reference's reason that skipped it (the
    estimate, whose failure is the telling one, before the exact engine's)."""
    out = {}
    for name in table:
        why = [r.skipped[name] for r in reversed(evidence.references) if name in r.skipped]
        if why:
            out[name] = why[0]
    return out


def _status(cmp: Comparison) -> Status:
    """The input's status: its worst element's, or `inconclusive` when no element was
    compared at all — none covered by an engine, or all undefined (NaN or inf in the function,
    autograd or a reference there): a verdict that compared nothing never passes."""
    if not cmp.compared() and (cmp.has(Status.UNCHECKED) or cmp.has(Status.UNDEFINED)):
        return Status.INCONCLUSIVE
    return cmp.worst()


UNDEFINED_EVERYWHERE = ("every element is undefined (NaN or inf in the function, autograd or a "
                        "reference there), so nothing was compared: give values where the "
                        "function is finite with --at")


def _forward(evidence: Evidence) -> tuple[Comparison | None, Status | None]:
    fwd = evidence.forward
    if fwd is None:
        return None, None
    estimate = estimated(fwd.answers)
    reference = fwd.autograd if fwd.autograd is not None else \
        (estimate.values if estimate is not None else None)
    if reference is None:
        return None, Status.UNDEFINED
    cmp = compare(reference, list(fwd.answers.values()), evidence.tol)
    return cmp, cmp.worst() if fwd.autograd is not None else Status.UNDEFINED


def _accumulation(evidence: Evidence) -> bool | None:
    """Whether .grad after N backward calls is N × the VJP (it is, unless backward keeps
    state between calls)."""
    acc, grads = evidence.accumulation, evidence.backward.grads
    if acc is None or grads is None:
        return None
    gap = max(float((acc.summed[k].double() - acc.repeat * grads[k].double()).abs().max())
              for k in acc.summed)
    tol = evidence.tol
    return gap <= tol.atol + tol.rtol * max(float(v.double().abs().max())
                                            for v in acc.summed.values())


def _failed_backward(prepared: Prepared, evidence: Evidence, excuses: Excuses) -> Verdict:
    """Backward could not run (runner/failed.py)."""
    statuses, failures = failed.verdict(prepared, evidence)
    return Verdict(statuses=statuses, failures=failures, aside=dict(excuses.aside))
