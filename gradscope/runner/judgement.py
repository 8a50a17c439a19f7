"""The verdict stage: each view's raw comparison with the excuses applied — mismatches where the
forward is a step become `surrogate`, every mismatch of a declared input too, and those that
are torch's documented departures (an embedding's padding row), ok zeros below a
vanishing op `vanishing` — then each input's status, the named checks (random upstreams, the
full Jacobian, random projections), forward mode and accumulation, and the list of failures
that decides the run: `passed = not failures`."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

import torch

from gradscope.engines.base import Answer, estimated
from gradscope.report.model import Failure, UpstreamCheck
from gradscope.report.status import Status
from gradscope.runner.evidence import Evidence, View
from gradscope.runner.excuses import Excuses
from gradscope.runner.excuses import composition as judged_by
from gradscope.runner.inplace import HookCheck
from gradscope.runner.prepare import Prepared
from gradscope.runner.projections import Projection
from gradscope.verdict import checks, outcome
from gradscope.verdict.compare import Comparison, compare


@dataclass(frozen=True)
class Seen:
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
    checks: tuple[UpstreamCheck, ...] = ()
    forward: Comparison | None = None
    forward_status: Status | None = None
    accumulation_ok: bool | None = None
    surrogate_elements: dict[str, torch.Tensor] = field(default_factory=dict)
    seen: dict[str, Seen] = field(default_factory=dict)
    failures: tuple[Failure, ...] = ()


def judge(prepared: Prepared, evidence: Evidence, excuses: Excuses) -> Verdict:
    if evidence.table is None:
        return _failed_backward(prepared, evidence)
    seen: dict[str, Seen] = {}
    surrogate: dict[str, torch.Tensor] = {}
    shapes = {n: tuple(t.shape) for n, t in prepared.bound.cast.items()}
    judged = [{n: _excused(n, view, excuses, seen, surrogate, shapes[n]) for n in view.raw}
              for view in evidence.views]
    table = judged[0]
    statuses = _covered({n: _status(c) for n, c in table.items()}, evidence, excuses)
    named = [checks.named(view.label, cmps)
             for view, cmps in zip(evidence.views[1:], judged[1:], strict=True)]
    named += [c for check in CHECKS for c in check(evidence, excuses, surrogate)]
    forward, forward_status = _forward(evidence)
    acc = _accumulation(evidence)
    failures = outcome.failures(
        statuses=statuses, mismatches={n: c.counts().get(Status.MISMATCH, 0)
                                      for n, c in table.items()},
        unjudged={**_unjudged(evidence, table), **_uncovered(evidence, excuses)},
        findings=excuses.findings, checks=named,
        forward=forward_status, nonfinite=evidence.nonfinite,
        allow_nan=prepared.options.allow_nan)
    return Verdict(table, statuses, tuple(named), forward, forward_status, acc, surrogate, seen,
                   tuple(failures))


def _excused(name: str, view: View, excuses: Excuses, seen: dict[str, Seen],
             surrogate: dict[str, torch.Tensor], shape: tuple[int, ...]) -> Comparison:
    """One input's raw comparison in one view, with its excuses applied (module doc)."""
    cmp = view.raw[name]
    ag = view.autograd[name]
    flat = excuses.flat.get(name)
    if flat is not None and cmp.has(Status.MISMATCH) and name in excuses.stepped:
        wrong = cmp.status == Status.MISMATCH.code
        wrong = wrong.any(0).reshape(flat.shape) if view.jacobian else wrong.reshape(flat.shape)
        stepped = flat & wrong & excuses.stepped[name].to(flat.device)
        if name in excuses.inconsistent and name not in excuses.declared:
            stepped &= ~excuses.inconsistent[name].to(flat.device)  # never excused
        cmp = cmp.surrogate(stepped.reshape(1, -1) if view.jacobian else stepped)
    departed = excuses.departed.get(name, {}).get(view.label)
    if departed is not None:  # torch's own departure (excused first: no relation to explain)
        cmp = cmp.surrogate(departed)
    if cmp.has(Status.MISMATCH):
        if name not in seen:
            reference = _reference(view.answers[name])
            seen[name] = Seen(name, ag, reference.values if reference else None,
                              reference.error if reference else None, cmp, view.jacobian)
        if name in excuses.declared:
            cmp = cmp.surrogate(_as_intended(name, view, excuses))
    if cmp.has(Status.SURROGATE):
        marked = cmp.status == Status.SURROGATE.code
        marked = (marked.any(0) if view.jacobian else marked)
        if departed is not None:  # (torch's, not a surrogate of the user's)
            marked = marked & ~(departed.any(0) if view.jacobian else departed).to(marked.device)
        marked = marked.reshape(shape).to(torch.bool)
        before = surrogate.get(name)
        surrogate[name] = marked if before is None else before | marked
    if name in excuses.vanishing and not view.jacobian:  # zero Jacobian entries are ordinary
        cmp = cmp.vanishing(ag)
    return cmp


def _as_intended(name: str, view: View, excuses: Excuses) -> torch.Tensor:
    """Where a declared surrogate's mismatches are excused: everywhere, or, with an intended
    form, where autograd is that form's gradient."""
    intended = excuses.intended.get(name)
    if intended is None:
        return torch.ones((), dtype=torch.bool)
    return intended[view.label].status != Status.MISMATCH.code


def intended(evidence: Evidence, excuses: Excuses,
             surrogate: Mapping[str, torch.Tensor]) -> list[UpstreamCheck]:
    """Each declared surrogate's intended form, compared element by element in every view."""
    out = []
    for name, views in excuses.intended.items():
        bad = sum(int((c.status == Status.MISMATCH.code).sum()) for c in views.values())
        worst = max((c.max_abs_error() for c in views.values()), default=0.0)
        word = Status.MISMATCH if bad else Status.SURROGATE
        why = excuses.declared.get(name, "")
        form = why.removeprefix("declared with ") if "=" in why else "declared in code"
        out.append(UpstreamCheck(f"{name} against its intended surrogate ({form})", not bad,
                                 worst, bad, {name: word}, word))
    return out


def _reference(answers: Mapping[str, Answer]) -> Answer | None:
    """The answer relations are read from: an exact one where it ran (no error bound),
    else the first."""
    exact = [a for a in answers.values() if a.error is None]
    return (exact or list(answers.values()) or [None])[0]


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
    compared at all (no engine covered any: a verdict that compared nothing never passes)."""
    if cmp.has(Status.UNCHECKED) and not cmp.compared():
        return Status.INCONCLUSIVE
    return cmp.worst()


def projections(evidence: Evidence, excuses: Excuses,
                surrogate: Mapping[str, torch.Tensor]) -> list[UpstreamCheck]:
    """Random projections over every element of a sampled input: passing where they agree
    within their slack, and where a kink or a surrogate explains the difference."""
    excused = set(surrogate) | set(excuses.declared)
    return [_departed(_projection(p, p.name in excused))
            if (p.name, p.index) in excuses.projections else _projection(p, p.name in excused)
            for p in evidence.projections]


def _departed(check: UpstreamCheck) -> UpstreamCheck:
    """A projection that agrees once torch's documented departures are undone (its error is
    the departure's): excused, and said so."""
    return replace(check, label=f"{check.label}: torch's documented departure (it agrees with "
                   "the departure undone)", passed=True, mismatches=0,
                   statuses=dict.fromkeys(check.statuses, Status.SURROGATE),
                   result=Status.SURROGATE)


def composition(evidence: Evidence, excuses: Excuses,
                surrogate: Mapping[str, torch.Tensor]) -> list[UpstreamCheck]:
    """A model at scale: each projection over every tensor at once, passing where it agrees
    within its slack; one whose stencil crossed a kink at every step tried is `not run`
    (nothing compared: never a pass for the tensors it alone covers); one that agrees only
    against autograd with torch's departures undone is that departure."""
    found = judged_by(evidence, excuses)
    if found is None:
        return []
    size = sum(evidence.backward.grads[n].numel() for n in found.order) \
        if evidence.backward.grads is not None else 0
    out = []
    for p in found.projections:
        label = (f"projection #{p.index + 1} over every tensor at once ({len(p.names):,} "
                 f"tensors, {size:,} elements)")
        if not p.compared:
            why = p.rejected or "its stencil crossed a kink or jump at every step tried"
            out.append(UpstreamCheck(f"{label}: not compared ({why})", True, float("nan"), 0,
                                     {}, Status.NOT_RUN))
            continue
        word = Status.OK if p.agrees else Status.MISMATCH
        out.append(UpstreamCheck(label, p.agrees, p.difference, 0 if p.agrees else 1,
                                 {} if p.agrees else {found.start or p.names[-1]: word}, word))
    # (against autograd with torch's departures undone: each is that departure, excused)
    return [_departed(c) for c in out] if excuses.composition is not None else out


def in_place(evidence: Evidence, excuses: Excuses,
             surrogate: Mapping[str, torch.Tensor]) -> list[UpstreamCheck]:
    """Each custom Function class checked in place, per element, on every call it made. A
    wrong one is `surrogate` (a warning) only where the user declared it: every input
    declared, or a declared input whose mismatches the declaration excused — a Function whose
    wrong gradient reaches only undeclared inputs still fails."""
    names = set(evidence.backward.grads or {})
    declared = set(excuses.declared)
    excused = (bool(names) and names <= declared) or bool(declared & set(surrogate))
    out = []
    for c in evidence.in_place:
        bad = sum(w.count for w in c.wrong)
        what = "gradient" if isinstance(c, HookCheck) else "argument"
        label = (f"{c.label} checked in place: {c.calls} call(s), {c.elements:,} {what} "
                 "element(s) per element")
        if not c.elements:
            out.append(UpstreamCheck(f"{label}: not compared (its forward refused perturbed "
                                     "arguments)", True, float("nan"), 0, {}, Status.NOT_RUN))
            continue
        word = Status.OK if not bad else Status.SURROGATE if excused else Status.MISMATCH
        out.append(UpstreamCheck(label, not bad or excused, float("nan"), bad, {}, word))
    return out


def _covered(statuses: dict[str, Status], evidence: Evidence, excuses: Excuses
             ) -> dict[str, Status]:
    """A model at scale: a tensor whose elements were not sampled takes its status from the
    projections (ok where they agree, inconclusive where nothing tells); the one the
    drill-down placed a wrong gradient at is a mismatch whatever its sample said."""
    found, finite = judged_by(evidence, excuses), evidence.finite
    if found is None or finite is None:
        return statuses
    covered = found.covered()
    out = dict(statuses)
    for name, ok in covered.items():
        if ok is False:
            out[name] = Status.MISMATCH
        elif name in finite.projected_only:
            out[name] = Status.OK if ok else Status.INCONCLUSIVE
    return out


def _uncovered(evidence: Evidence, excuses: Excuses) -> dict[str, str]:
    """Why a tensor that only the projections covered is inconclusive."""
    found, finite = judged_by(evidence, excuses), evidence.finite
    if found is None or finite is None:
        return {}
    why = (f"projected only together with others: the drill-down placed the wrong gradient "
           f"at {found.start} and did not reach this tensor alone" if found.start else
           "no projection over it could be compared alone (each crossed a kink at every "
           "step, the target rejected its points, or its module's children agreed alone)")
    return {n: why for n, ok in found.covered().items()
            if ok is None and n in finite.projected_only}


# The named checks beyond each view's own (a random upstream, the full Jacobian): functions of
# the evidence, the excuses and the surrogate elements found, each returning UpstreamChecks
# that name themselves; a failing one fails the run. A new check is a function and its line.
CHECKS: tuple[Callable[[Evidence, Excuses, Mapping[str, torch.Tensor]],
                       list[UpstreamCheck]], ...] = (projections, composition, in_place,
                                                         intended)


def _projection(p: Projection, surrogate: bool) -> UpstreamCheck:
    label = f"random projection #{p.index + 1} of {p.name} (all {p.elements:,} elements)"
    if p.rejected:  # nothing compared: the sampled elements still judge the input
        return UpstreamCheck(f"{label}: the target rejected its points ({p.rejected})", True,
                             float("nan"), 0, {p.name: Status.NOT_RUN}, Status.NOT_RUN)
    finite = math.isfinite(p.difference)
    ok = p.kinked or surrogate or (p.difference <= p.slack and finite)
    word = Status.NONDIFFERENTIABLE if p.kinked else Status.SURROGATE if surrogate else (
        Status.OK if ok else Status.MISMATCH)
    return UpstreamCheck(
        label, ok, p.difference if finite else float("nan"), 0 if ok else 1, {p.name: word}, word)


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


def _failed_backward(prepared: Prepared, evidence: Evidence) -> Verdict:
    """Backward could not run: every input is a mismatch, and the failure says why."""
    names = prepared.target.names
    statuses = dict.fromkeys(names, Status.MISMATCH)
    failure = evidence.backward.failure
    assert failure is not None
    reason = f"backward failed: {failure.message}"
    failures = [Failure(failure.kind, failure.kind,
                        sum(prepared.bound.cast[n].numel() for n in names))]
    failures += [Failure(Status.MISMATCH, n, 0, reason) for n in names]  # (no count)
    failures += outcome.nonfinite_failures(evidence.nonfinite, prepared.options.allow_nan)
    return Verdict(statuses=statuses, failures=tuple(failures))
