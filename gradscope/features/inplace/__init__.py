"""Custom gradients checked in place: one watched forward and backward (`calls.py`) finds each
custom `autograd.Function` call on the path to the output, with the arguments it received and
the gradient it got from above; each call's backward is compared per element with finite
differences of that Function's own forward (its cost is the op's, not the model's:
`culprits.py`); each gradient hook registered in the forward is checked for whether it changed
the gradient it was given (`hooks.py`). Each class and hook is named with file and line.

What it compares is not the target the user named, so by the first rule it explains and never
decides: where the target's own evidence fails, the wrong Function is the culprit (its check
fails with it, and the headline names it); where the target's gradient agrees everywhere it
was compared, an inner Function departing from its own forward's derivative (a tangent-space
convention, a symmetrised gradient, an output the target does not use) is a note — a warning
under `--fail-on warning` — only where it is proven not to reach the target: with its
derivative in place of its backward, the target's gradient stays within its tolerance
(`reach.py`). Where it moves beyond it, that move is evidence about the target, and the run
fails naming the Function (comparisons with no power — three projections of a float32 model
— agreed by saying nothing). A declared surrogate excuses it where the declaration reaches.
A target that is itself one Function is its own culprit, with the relation its table found.
A custom op whose forward writes into an argument its schema declares unchanged fails the run
(`custom_ops.mutation`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from gradscope.engines.fd.policy import DEFAULT_EPS
from gradscope.features import backwards, relations, surrogates
from gradscope.features.base import Context, Diagnosis, Feature, Interim, StepAside, value_of
from gradscope.features.inplace import (
    culprits,
    custom_ops,
    pointed,
    reach,
    saturated,
    sole,
    source,
    unseen,
)
from gradscope.features.inplace.culprits import ClassCheck
from gradscope.features.inplace.hooks import HookCheck
from gradscope.report.model import Diagnostic, NamedCheck
from gradscope.report.status import Status

DEPARTS = "departs from its own forward's derivative on the arguments it received"
PROVEN = ("with that derivative in its place the target's gradient moves by at most {worst:.2g} "
          "of its tolerance (a convention, a symmetrised gradient, or an output the target "
          "does not use): a note, not a failure")
UNPROVEN = ("the target's own comparisons found no disagreement, but whether the departure "
            "reaches its gradient was not proven ({why}): a note, not a failure")
REACHES = ("with its forward's derivative in its place the target's gradient moves beyond its "
           "tolerance at {count:,} element(s) (up to {worst:.3g}× the tolerance){where}: the "
           "target's own comparisons did not see it")


@dataclass(frozen=True)
class InPlaceFacts:
    checks: tuple[ClassCheck | HookCheck, ...] = ()
    # a model at scale: projections over the target's tensors a wrong Function received
    pointed: tuple[pointed.ArgumentProjections, ...] = ()
    reach: reach.Reach | None = None  # what the wrong Functions' derivatives would move
    # saved tensors changed in place where no version check sees it (unseen.py)
    changed: tuple[unseen.Unseen, ...] = ()


class InPlace(Feature["InPlaceFacts"]):
    name = "in place"
    needs = (relations,)
    reads = (surrogates, backwards)

    def facts(self, ctx: Context) -> InPlaceFacts | None:
        """Each custom Function class and gradient hook on the run, checked call by call
        (none for a target that is itself one Function: its own table is that check)."""
        prepared, back = ctx.prepared, ctx.evidence.backward
        target, options = prepared.target, prepared.options
        if not target.runs_user_code or target.own_function is not None or back.grads is None \
                or options.plain:  # (its recording stand-ins are a shortcut --plain leaves out)
            return None
        if getattr(back.engine.output, "grad_fn", None) is None:
            return None
        finite = ctx.evidence.finite
        at_scale = finite is not None and finite.scale
        if not prepared.request.explain_passing and not at_scale:
            return None  # (it only explains: a caller that asks so checks a failure again;
            # at scale its finding points the projections that are evidence: pointed.py)
        if back.engine.compiled:  # (dynamo would trace the recording too)
            raise StepAside("the target calls torch.compile'd code, whose Functions dynamo "
                            "traced into its graph")
        eps = finite.fd.eps if finite is not None and finite.fd is not None else None
        # (the evaluation autograd differentiated: under --autocast its custom_bwd paths)
        found, changed = culprits.checked_in_place(target.autograd_forward,
                                                   prepared.bound.cast, back.upstream,
                                                   ctx.evidence.tol,
                                                   eps or options.eps or DEFAULT_EPS,
                                                   options.max_fd, options.sample,
                                                   options.seed)
        if not found and not changed:
            return None
        wrong = [c for c in found if isinstance(c, ClassCheck) and c.wrong]
        aimed = ()
        if wrong and at_scale and finite is not None and finite.fd is not None:
            tol = ctx.evidence.tol
            aimed = pointed.projected(wrong, prepared.bound.cast, finite.fd, back.grads,
                                      back.upstream, tol.atol, tol.rtol, options.seed)
        return InPlaceFacts(tuple(found), aimed, _reach(ctx, wrong) if wrong else None,
                            changed)

    def target_checks(self, ctx: Context) -> tuple[Diagnostic, ...]:
        """A custom op whose forward wrote into an argument its schema declares unchanged
        (a failing kind: the op is the target's own code, wrong whatever its gradient)."""
        facts = ctx.of(self)
        if facts is None:
            return ()
        return tuple(custom_ops.mutation(op, c.written) for c in facts.checks
                     if isinstance(c, ClassCheck) and c.written
                     and (op := custom_ops.registered(c.cls)) is not None)

    def statuses(self, ctx: Context, statuses: Mapping[str, Status]
                 ) -> tuple[dict[str, Status], dict[str, str]]:
        """A model at scale: the tensor a pointed projection's drill-down placed a wrong
        gradient at is a mismatch (the target's own evidence, as the projections' is); so is
        one the wrong Functions' derivatives would move beyond its tolerance (unless every
        input was declared a surrogate)."""
        facts = ctx.of(self)
        out = dict(statuses)
        if facts is not None:
            out.update(pointed.placed(facts.pointed))
            if facts.reach is not None and facts.reach.reaches and not _all_declared(ctx):
                out.update({n: Status.MISMATCH for n in facts.reach.moved
                            if out.get(n) in (Status.OK, Status.INCONCLUSIVE)})
        return out, {}

    def checks(self, ctx: Context, decided: Interim) -> list[NamedCheck]:
        """Each class checked in place, per element, on every call it made. A wrong one is
        `surrogate` only where the user declared it (every input declared, or a declared
        input whose mismatches the declaration excused); otherwise it fails only beside the
        target's own failing evidence, which it explains."""
        facts = ctx.of(self)
        if facts is None:
            return []
        aimed = pointed.rows(facts.pointed)
        decided = replace(decided, checks=(*decided.checks, *aimed))
        declaring = ctx.of(surrogates.FEATURE)
        declared = set(declaring.declared) if declaring is not None else set()
        excused = _all_declared(ctx) or bool(declared & set(decided.surrogate))
        moved = facts.reach is not None and facts.reach.reaches and not excused
        failing = decided.failing or moved
        out = [_moved(facts, facts.reach)] if moved else []
        for c in facts.checks:
            bad = sum(w.count for w in c.wrong)
            what = "gradient" if isinstance(c, HookCheck) else "argument"
            label = (f"{c.label} checked in place: {c.calls} call(s), {c.elements:,} {what} "
                     "element(s) per element")
            if not c.elements:
                out.append(NamedCheck(f"{label}: not compared (its forward refused "
                                      "perturbed arguments)", Status.NOT_RUN))
                continue
            word = Status.OK if not bad else Status.SURROGATE if excused else Status.MISMATCH
            if isinstance(c, ClassCheck) and c.unread:
                label += (f"; not compared: {', '.join(c.unread)}, which its forward never "
                          "reads (passed, but reached another way: a callable, an attribute)")
                word = Status.INCONCLUSIVE if not bad else word
            if bad and not excused and not failing:
                label += " (a note: it does not reach the target's gradient)" if \
                    facts.reach is not None and facts.reach.unproven is None else \
                    " (a note: the target's own comparisons agree)"
            out.append(NamedCheck(label, word, mismatches=bad,
                                  noted=bool(bad) and not excused and not failing))
        return aimed + out

    def diagnose(self, ctx: Context, verdict: Any, said: Mapping[str, Diagnosis]) -> Diagnosis:
        """The wrong classes and hooks named: culprits where the target fails, notes where it
        does not; a target that is one Function is its own culprit."""
        facts = ctx.of(self)
        explained = value_of(said, relations.FEATURE) or {}
        if facts is not None:
            found = culprits.diagnostics(facts.checks)
            if verdict.failures:
                found += [u.diagnostic() for u in facts.changed]
                mismatched = _mismatched(verdict)
                found += source.culprits(facts.checks, _inconsistent(ctx, mismatched),
                                         explained)
                found += sole.culprits(facts.checks, mismatched, explained)
            said = (_reached(d, facts.reach) for d in found) if verdict.failures else \
                (_noted(d, facts.reach) for d in found)
            return Diagnosis((*self.target_checks(ctx), *said, *saturated.diagnostics(
                [c for c in facts.checks if isinstance(c, ClassCheck)])))
        own = ctx.prepared.target.own_function
        if own is None:
            return Diagnosis()
        if Status.MISMATCH in verdict.statuses.values():
            first = next(n for n, s in verdict.statuses.items() if s == Status.MISMATCH)
            count = verdict.table[first].counts().get(Status.MISMATCH, 0)
            return Diagnosis((culprits.named(own, first, explained.get(first), count),))
        # the table agrees, another upstream fails (rows that sum to one give an upstream of
        # ones a zero VJP whatever backward scales): that check's failing input, its relation
        failing = next((c for c in verdict.checks if not c.passed and c.mismatches
                        and Status.MISMATCH in c.statuses.values()), None)
        backward = ctx.of(backwards.FEATURE)
        if failing is None or not verdict.failures or (backward is not None and any(
                bool(m.any()) for m in backward.nonlinear.values())):
            return Diagnosis()  # (a backward not linear in its upstream: said so, no factor)
        first = next(n for n, s in failing.statuses.items() if s == Status.MISMATCH)
        return Diagnosis((culprits.named(own, first, explained.get(first), failing.mismatches),))


def _mismatched(verdict: Any) -> dict[str, int]:
    """The inputs whose status is mismatch, with their mismatching elements."""
    return {n: verdict.table[n].counts().get(Status.MISMATCH, 0)
            for n, s in verdict.statuses.items() if s == Status.MISMATCH and n in verdict.table}


def _inconsistent(ctx: Context, mismatched: Mapping[str, int]) -> dict[str, int]:
    """Those of the `mismatched` inputs whose surrogate the surrogate checks found against the
    forward (not declared: a declared one's form is the user's)."""
    facts = ctx.of(surrogates.FEATURE)
    if facts is None:
        return {}
    return {n: k for n, k in mismatched.items()
            if n in facts.inconsistent and n not in facts.declared}


def _all_declared(ctx: Context) -> bool:
    """Whether the user declared every input a surrogate (then a wrong Function is theirs)."""
    names = set(ctx.evidence.backward.grads or {})
    declaring = ctx.of(surrogates.FEATURE)
    return bool(names) and declaring is not None and names <= set(declaring.declared)


LOWERED = ("a run mode lowered autograd's precision, and the call is wrong only beyond its own "
           "precision's tolerance, which its rounding may explain")
SEEN = ("it was not asked: the target's raw comparisons disagreed before their excuses "
        "(a declared surrogate, a documented departure) were applied")


def _reach(ctx: Context, wrong: list[ClassCheck]) -> reach.Reach:
    """What the wrong Functions' derivatives would move the target's gradient by — asked
    only where the target's own comparisons found nothing (where they disagree, they decide
    and excuse: a flat forward's surrogate there is the surrogate checks')."""
    if any(c.has(Status.MISMATCH) for view in ctx.evidence.views for c in view.raw.values()):
        return reach.Reach({}, unproven=SEEN)
    prepared, back = ctx.prepared, ctx.evidence.backward
    assert back.grads is not None
    if prepared.target.twin is not None:
        # (a run mode lowered autograd's precision: a call wrong only at its half precision's
        # tolerance may be its rounding, and the target's tolerance is widened by what the
        # mode changed; a common factor held on fresh data is no rounding: its move through
        # the mode's own evaluation is judged at the target's tolerance)
        wrong = [replace(c, wrong=tuple(w for w in c.wrong if w.systematic)) for c in wrong]
        wrong = [c for c in wrong if c.wrong]
        if not wrong:
            return reach.Reach({}, unproven=LOWERED)
    try:
        return reach.moved(prepared.target.autograd_forward, prepared.bound.cast, wrong,
                           back.grads, ctx.evidence.tol)
    except Exception as exc:  # (a second forward or its backward refused: nothing proven,
        # the culprits found stay)
        return reach.Reach({}, unproven=f"its second forward and backward raised "
                                        f"{type(exc).__name__}")


def _moved(facts: InPlaceFacts, moved: reach.Reach | None) -> NamedCheck:
    """The named check of the target's own gradient with the wrong Functions' derivatives in
    place of their backwards: it fails (evidence about the target)."""
    assert moved is not None
    names = ", ".join(f"{n} ({k:,})" for n, k in moved.moved.items())
    labels = ", ".join(c.label for c in facts.checks if isinstance(c, ClassCheck) and c.wrong)
    return NamedCheck(f"the target's gradient with {labels} replaced by its forward's "
                      f"derivative: moves beyond the tolerance in {names}", Status.MISMATCH,
                      moved.worst, sum(moved.moved.values()))


def _where(moved: reach.Reach) -> str:
    names = list(moved.moved)
    return f" of {', '.join(names[:3])}" + (f" and {len(names) - 3} more" if len(names) > 3
                                            else "")


def _reached(culprit: Diagnostic, moved: reach.Reach | None) -> Diagnostic:
    """A culprit of a failing run; where its departure was the failure (it reaches the
    target), said so."""
    if moved is None or not moved.reaches or culprit.kind != "culprit":
        return culprit
    said = REACHES.format(count=sum(moved.moved.values()), worst=moved.worst,
                          where=_where(moved))
    return replace(culprit, message=f"{culprit.message}; {said}")


def _noted(culprit: Diagnostic, moved: reach.Reach | None) -> Diagnostic:
    """A culprit of a target that passes: the same finding, said as a note — with its proof
    that it does not reach the target, or why there is none."""
    why = "no custom Function's call was repeated" if moved is None else moved.unproven
    tail = UNPROVEN.format(why=why) if why is not None else PROVEN.format(
        worst=moved.worst if moved is not None else 0.0)
    return replace(culprit, kind="inner_departure", summary=None,
                   message=f"{culprit.op} {DEPARTS} "
                           f"({culprit.message.split(': ', 1)[-1]}); {tail}",
                   hint=("nothing to fix for this target; where the Function is used so that "
                         "its own derivative matters, check it there (or alone: gradscope "
                         "check FILE:CLASS)"))


FEATURE = InPlace()
