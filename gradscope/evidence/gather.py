"""The evidence stage: every engine run on the prepared target, and what the verdict will judge
laid out as views — autograd beside each reference's answers for one question (the VJP for
the table's upstream, for each seeded random upstream, the full Jacobian) — with the raw
per-element comparison of each (before anything is excused). Two-point finite-difference
estimates a raw comparison doubts are refined here, once, so every later stage rests on the
same, final estimates. Also the forward-mode and accumulation evidence, and a run mode's own
answers to the views' questions (`Target.alongside`)."""

# Long: one stage — the views, the refinement that doubts them and the other evidence all read
# and extend one Evidence; split, each part would import the others' private steps.

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from gradscope.compare.elements import Comparison, compare, undefined_alone
from gradscope.compare.tolerance import FD_ERROR_FACTOR, Tolerance
from gradscope.engines.base import Answer
from gradscope.engines.fd.batcher import rejection
from gradscope.errors import GradscopeError, TargetError, UsageError
from gradscope.evidence import references as registry
from gradscope.evidence import roundoff
from gradscope.evidence.backward import (
    Backward,
    backward,
    base_value,
    claimed,
    computed_in,
    deterministic,
    diagonal,
    precision_note,
    with_flow,
)
from gradscope.evidence.custom_backward import CallsApart
from gradscope.evidence.prepare import Prepared, shape_hint
from gradscope.evidence.references import Finite, Reference, Setup
from gradscope.inputs.bind import tangents_for
from gradscope.memory import gpu_peak
from gradscope.report.status import Status
from gradscope.rng import generator, seed_for
from gradscope.tensors import all_finite

RANDOM_UPSTREAMS = 2  # extra seeded upstream vectors behind every `check` verdict...
ONE_RANDOM_UPSTREAM_FROM = 1 << 16  # ...one for outputs this large: a single vector already
# weighs every output element independently, and a second costs a backward and compares
JACOBIAN_CHECK_ENTRIES = 4096  # `check` also compares the full Jacobian up to this size
MAX_JACOBIAN_ENTRIES = 250_000  # `jacobian` refuses larger Jacobians (all inputs together)


@dataclass(frozen=True)
class View:
    """One question put to every engine: autograd's answer per input, each reference's
    (input → engine → answer), and their raw comparison (input → statuses, nothing excused).
    `upstream` None: the question is the Jacobian (out_numel, in_numel)."""

    label: str
    upstream: torch.Tensor | None
    autograd: dict[str, torch.Tensor]
    answers: dict[str, dict[str, Answer]]
    raw: dict[str, Comparison]

    @property
    def jacobian(self) -> bool:
        return self.upstream is None

    def elements(self, mask: torch.Tensor, shape: Sequence[int]) -> torch.Tensor:
        """A mask over this view's statuses as one over an input's elements (`shape`): a
        Jacobian's (outputs, elements) column is marked where any of its entries is."""
        return (mask.any(0) if self.jacobian else mask).reshape(tuple(shape))

    def entries(self, mask: torch.Tensor) -> torch.Tensor:
        """A mask over an input's elements as one over this view's statuses: a Jacobian's
        column takes the element's mark in every entry (broadcast)."""
        return mask.reshape(1, -1) if self.jacobian else mask

    def mismatched(self, name: str, shape: Sequence[int]) -> torch.Tensor:
        """Input-shaped: the elements this view's raw comparison found wrong."""
        return self.elements(self.raw[name].status == Status.MISMATCH.code, shape)

    def reference(self, name: str) -> Answer | None:
        """The answer for `name` relations are read from: an exact one where it ran (no error
        bound), else the first."""
        answers = list(self.answers.get(name, {}).values())
        return next((a for a in answers if a.error is None), answers[0] if answers else None)


@dataclass(frozen=True)
class Forward:
    """Forward mode J·t: the tangents, torch forward AD's answer (or why it failed) and each
    reference's."""

    tangents: dict[str, torch.Tensor]
    autograd: torch.Tensor | None
    autograd_skipped: str | None
    answers: dict[str, Answer]
    skipped: dict[str, str] = field(default_factory=dict)  # reference → why it has no answer


@dataclass(frozen=True)
class Accumulation:
    """.grad after `repeat` backward calls without zeroing (jvp --repeat)."""

    repeat: int
    summed: dict[str, torch.Tensor]


@dataclass(frozen=True)
class Evidence:
    backward: Backward
    references: tuple[Reference, ...]
    tol: Tolerance
    computed: torch.dtype  # the lowest precision the target computes in
    views: tuple[View, ...] = ()  # the table's first (absent when backward failed)
    forward: Forward | None = None
    accumulation: Accumulation | None = None
    notes: tuple[str, ...] = ()
    timings: dict[str, float] = field(default_factory=dict)
    # where the function or autograd is NaN/inf at the given inputs themselves ("output",
    # input names)
    nonfinite: tuple[str, ...] = ()
    # a run mode's own answers to the views' questions (Target.alongside), which its feature
    # compares with autograd's
    alongside: Any = None
    # the tolerance of autograd's own evaluation, where a run mode lowered its precision below
    # `computed` (its twin's): what autograd's answers are compared with one another at (a
    # backward's linearity); None: `tol`
    own_tol: Tolerance | None = None
    # where backward failed: each reference's answers for the table's upstream (engine →
    # input → answer), which the report shows beside autograd's failure
    unanswered: dict[str, dict[str, Answer]] = field(default_factory=dict)

    @property
    def table(self) -> View | None:
        return self.views[0] if self.views else None

    @property
    def autograd_tol(self) -> Tolerance:
        """The tolerance two of autograd's own answers are compared at."""
        return self.own_tol or self.tol

    @property
    def finite(self) -> Finite | None:
        """The finite-difference reference: what the forward itself does near the inputs
        (kinks, flat stretches), which only it measures."""
        return next((r for r in self.references if isinstance(r, Finite)), None)


def gather(prepared: Prepared, progress: Callable[[str, int], Any] | None = None) -> Evidence:
    """Run the engines and lay out the views."""
    timings: dict[str, float] = {}
    with _timed(timings, "autograd", prepared.target), shape_hint(prepared.bound):
        back = backward(prepared)
        # how finite differences evaluate the target: the target decides, from autograd's own
        # output (its graph)
        for_values, learned = prepared.target.for_values(back.engine.output)
        deterministic(prepared, back.engine.output)
        back = with_flow(prepared, back)
    computed = computed_in(prepared, back.engine.output, back.lowest)
    base, stepped = base_value(prepared, back, computed)  # (a twin's, where there is one)
    probe = diagonal(back)
    setup = Setup(prepared, base, back.upstream, for_values, stepped, progress=progress,
                  claimed=claimed(back), diagonal=probe)
    references: list[Reference] = []
    for start in registry.REFERENCES:  # (read at run time: the registration is there)
        with _timed(timings, "", prepared.target) as named:
            references.append(start(replace(setup, before=tuple(references))))
            named.append(references[-1].name)
    tol = Tolerance.for_dtype(str(computed).removeprefix("torch."), prepared.options.rtol,
                              prepared.options.atol)
    twin = prepared.target.twin
    lowest = twin.precision() if twin is not None else None
    own = Tolerance.for_dtype(str(lowest).removeprefix("torch."), prepared.options.rtol,
                              prepared.options.atol) if lowest is not None else None
    evidence = Evidence(back, tuple(references), tol, computed, own_tol=own,
                        notes=(*back.notes, *learned,
                               *precision_note(prepared, computed, back.engine.output)),
                        timings=timings)
    if back.grads is None:  # what the references say the gradient is: the report shows it
        answers = {r.name: r.vjp(back.upstream.to(torch.float64))
                   for r in evidence.references if r.ran}
        return _scanned(prepared, replace(evidence, unanswered=answers))
    evidence = _laid_out(prepared, evidence)
    if probe is not None and probe.apart:  # (its backward calls count: determinism judges)
        evidence = replace(evidence, backward=replace(
            evidence.backward, apart=(*evidence.backward.apart, *probe.apart)))
    return evidence


def _scanned(prepared: Prepared, evidence: Evidence) -> Evidence:
    """The evidence with its one scan for NaN and inf at the inputs themselves (`_nonfinite`),
    after the views are laid out: the table's kinks and estimates excuse some."""
    table = evidence.table
    kinks = {n: next((k for r in evidence.references for k in [r.kink(n)] if k is not None),
                     None) for n in prepared.target.names} if table is not None else None
    nonfinite, excused = _nonfinite(prepared, evidence.backward, table, kinks)
    return replace(evidence, nonfinite=nonfinite, notes=(*evidence.notes, *excused))


def _nonfinite(prepared: Prepared, back: Backward, table: View | None = None,
               kinks: Mapping[str, torch.Tensor | None] | None = None
               ) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Where the function or autograd is NaN/inf at the inputs themselves — failures — and
    notes on what is excused: an output undefined at values gradscope chose (its spread
    reaches the edge of a domain: gradscope's choice, not the target's failure; those elements
    are `undefined`), and a gradient undefined where the derivative is (a kink or pole in the
    finite-difference stencil)."""
    failing, notes = [], []
    if not all_finite(back.engine.output.detach()):
        chosen = prepared.bound.chosen
        if chosen:
            count = int((~torch.isfinite(back.engine.output.detach())).sum())
            notes.append(f"the output is NaN or infinite at {count} element(s) at the values "
                         f"gradscope chose for {', '.join(chosen)} (a value such as a -inf "
                         "mask, or the edge of a domain: a pole, a log or root of 0 or less); "
                         "the gradient is compared where the output is defined (the upstream "
                         "is 0 at those elements): give values with --at to check them")
        else:
            failing.append("output")
    for name, grad in (back.grads or {}).items():
        if all_finite(grad):
            continue
        bad = ~torch.isfinite(grad)
        kink = (kinks or {}).get(name)
        if kink is not None and kink.shape == bad.shape:
            bad = bad & ~kink.to(bad.device)
        estimate = table.answers[name].get("finite_difference") if table is not None else None
        if prepared.bound.chosen and estimate is not None and estimate.values.shape == bad.shape:
            bad = bad & torch.isfinite(estimate.values.to(bad.device))  # the function too
        if bool(bad.any()):
            failing.append(name)
    return tuple(failing), tuple(notes)


def _laid_out(prepared: Prepared, evidence: Evidence) -> Evidence:
    """The views, refined once where a raw comparison doubted a two-point estimate; then
    forward mode and accumulation."""
    command = prepared.request.command
    jacobians = _jacobians(prepared, evidence) if command == "jacobian" or (
        command == "check" and _entries(prepared, evidence) <= JACOBIAN_CHECK_ENTRIES) else None
    rounding = roundoff.measure(evidence.backward.engine, evidence.computed,
                                prepared.target.twin)
    # autograd's answers and the round-off measured around them are asked once: a refinement
    # rebuilds the comparisons, never a backward (each backward run feeds a comparison)
    randoms = _random_upstreams(prepared, evidence.backward) \
        if prepared.request.command == "check" and not _scalar_at_scale(evidence) else []
    measured: dict[str, Any] = {}
    questions = _questions(prepared, evidence, jacobians, rounding, randoms, measured)
    asked = [{r.name: q.ask(r) for r in q.references} for q in questions]
    views = [_view(evidence, q, answers, prepared.target.names)
             for q, answers in zip(questions, asked, strict=True)]
    refined, doubted = _refined(evidence.references, views, evidence.tol)
    if doubted:  # (only the refined estimates asked again, only their inputs compared again)
        evidence = replace(evidence, references=refined)
        finite = evidence.finite
        assert finite is not None
        views = [_view(evidence, q, {**answers, finite.name: q.ask(finite)}, doubted, view)
                 if finite.name in answers else view
                 for q, answers, view in zip(questions, asked, views, strict=True)]
    # pairs of backward calls that answered one question differently, found on the way (a
    # round-off measure's side asked again, a batched backward beside a plain one)
    apart = (*(rounding.apart if rounding is not None else ()),
             *_engine_apart(evidence.backward.engine))
    if apart:
        evidence = replace(evidence, backward=replace(
            evidence.backward, apart=(*evidence.backward.apart, *apart)))
    tic = time.perf_counter()  # (called last: a run mode's own run, in one mode of its own)
    alongside = prepared.target.alongside(prepared.bound.cast,
                                          {v.label: v.upstream for v in views})
    if alongside is not None:
        evidence.timings["alongside"] = time.perf_counter() - tic
    return _scanned(prepared, replace(
        evidence, views=tuple(views), forward=_forward(prepared, evidence),
        accumulation=_accumulation(prepared, evidence), alongside=alongside))


def _engine_apart(engine: Any) -> list[CallsApart]:
    """The autograd engine's own pairs of answers to one question that differ."""
    return [found for first, again, before, after in engine.apart
            for found in [CallsApart.of(first, again, before, after)] if found is not None]


# ------------------------------------------------------------------ views
def _references_for(evidence: Evidence, view: str) -> list[Reference]:
    """The references a view is judged against: all of them, except that autograd's VJP for
    another upstream is judged against the exact ones where they ran (an estimate, compared
    per element in the table already, adds only noise there)."""
    ran = [r for r in evidence.references if r.ran]
    if view == "random":
        exact = [r for r in ran if r.exact]
        return exact or ran
    return ran


@dataclass(frozen=True)
class Question:
    """One view's question: its label and upstream (None: the Jacobian), autograd's answer,
    the references it is put to and how each is asked (`ask`), and how their answers' bounds
    are widened by autograd's measured round-off."""

    label: str
    upstream: torch.Tensor | None
    autograd: Mapping[str, torch.Tensor]
    references: Sequence[Reference]
    ask: Callable[[Reference], dict[str, Answer]]
    widen: Callable[[dict[str, dict[str, Answer]]], dict[str, dict[str, Answer]]]


def _view(evidence: Evidence, question: Question, asked: Mapping[str, Mapping[str, Answer]],
          names: Sequence[str], before: View | None = None) -> View:
    """autograd against the references' answers (engine → input → answer, widened here),
    every element where the forward has a kink excepted (whichever references answer this
    view); with `before`, only `names` compared again, the others kept."""
    label, upstream, autograd = question.label, question.upstream, question.autograd
    answers = question.widen({e: dict(a) for e, a in asked.items()})
    per_input = {n: {e: a[n] for e, a in answers.items() if n in a}
                 for n in (before.raw if before is not None else names)}
    raw = dict(before.raw) if before is not None else {}
    for name in names:
        kinks = [k for r in evidence.references for k in [r.kink(name)] if k is not None]
        kink = None
        for k in kinks:
            kink = k if kink is None else kink | k
        if kink is not None and upstream is None:  # a Jacobian: a kinked column is kinked
            kink = kink.reshape(1, -1)  # for every output element (View.entries)
        raw[name] = compare(autograd[name], list(per_input[name].values()), evidence.tol, kink)
        first = evidence.backward.grads
        if label != "table" and first is not None and name in first \
                and all_finite(first[name]):  # (the table's NaN/inf fails whole: `_nonfinite`)
            raw[name] = undefined_alone(raw[name], autograd[name],
                                         list(per_input[name].values()), kink)
    return View(label, upstream, dict(autograd), per_input, raw)


def _scalar_at_scale(evidence: Evidence) -> bool:
    """A scalar model at scale: its VJP for another upstream is a multiple of the table's
    (the linearity check of user code covers it), so no random upstream is asked."""
    finite = evidence.finite
    return finite is not None and finite.scale and evidence.backward.engine.output.numel() == 1


def _questions(prepared: Prepared, evidence: Evidence,
               jacobians: tuple[dict[str, torch.Tensor], dict[str, dict[str, Answer]]] | None,
               rounding: roundoff.RoundOff | None,
               randoms: Sequence[tuple[str, torch.Tensor, dict[str, torch.Tensor]]],
               measured: dict[str, Any]) -> list[Question]:
    """The views' questions (the table's, `randoms`, `jacobians`); below float64 every
    answer's bound gets autograd's measured round-off, kept in `measured` by view so that a
    view laid out again measures nothing again."""
    back = evidence.backward
    command = prepared.request.command
    assert back.grads is not None

    def widen(label: str, noise: Callable[[Any], Any], elementwise: bool = True
              ) -> Callable[[dict[str, dict[str, Answer]]], dict[str, dict[str, Answer]]]:
        if rounding is None:
            return lambda answers: answers
        return lambda answers: roundoff.widened(
            answers, roundoff.remembered(measured, label, noise), elementwise)

    questions = []
    if command != "jacobian":
        table = back.upstream.to(torch.float64)
        ones = prepared.bound.upstream.ones and all_finite(back.engine.output.detach())
        questions.append(Question(
            "table", back.upstream, back.grads, _references_for(evidence, "table"),
            lambda r: r.vjp(table, ones),
            widen("table", lambda where: rounding.vjp(back.upstream, where, back.grads))))
    for label, v, grads in randoms:
        questions.append(Question(
            label, v, grads, _references_for(evidence, "random"), lambda r, v=v: r.vjp(v),
            widen(label, lambda where, v=v, grads=grads: rounding.vjp(v, where, grads))))
    if jacobians is not None:
        autograd, fixed = jacobians
        shape = tuple(back.engine.output.shape)
        questions.append(Question(
            "full Jacobian", None, autograd, _references_for(evidence, "jacobian"),
            lambda r: fixed[r.name] if r.name in fixed else r.jacobian(shape),
            widen("full Jacobian", lambda _: rounding.jacobian(autograd), False)))
    if command == "jacobian":  # the table is the Jacobian
        questions.insert(0, questions.pop())
    return questions


def _random_upstreams(prepared: Prepared, back: Backward
                      ) -> list[tuple[str, torch.Tensor, dict[str, torch.Tensor]]]:
    """The seeded random upstream vectors (uniform(-1, 1): mixed signs and scales, never
    larger than the ones upstream whose absolute tolerance they share) and autograd's VJP
    for each."""
    output, seed = back.engine.output, prepared.options.seed
    count = RANDOM_UPSTREAMS if output.numel() < ONE_RANDOM_UPSTREAM_FROM else 1
    out = []
    for k in range(count):
        # drawn in float32 (randn in float64 costs seven times as much at a million elements)
        # and moved to (-1, 1) there: 2u − 1 is exact in float32, in half the bytes
        drawn = torch.rand(output.shape, generator=generator(seed, f":upstream{k}"))
        drawn = drawn.mul_(2.0).sub_(1.0).to(output.device)
        v = drawn.to(torch.float64)
        if not all_finite(output.detach()):  # compared where the function is defined
            v = v * torch.isfinite(output.detach())
            drawn = v
        label = (f"random upstream #{k + 1} (uniform(-1,1), seed "
                 f"{seed_for(seed, f':upstream{k}')})")
        # (a copy of its own where user code — a hand-written backward, a hook — may write
        # into what backward is given; torch's own ops never do)
        given = (v if v.dtype == output.dtype and not prepared.target.runs_user_code
                 else drawn.to(output.dtype, copy=drawn is v))
        out.append((label, v, back.engine.vjp(given)))
    return out


def _entries(prepared: Prepared, evidence: Evidence) -> int:
    leaves = evidence.backward.engine.leaves
    return evidence.backward.engine.output.numel() * sum(leaves[n].numel()
                                                         for n in prepared.target.names)


def _jacobians(prepared: Prepared, evidence: Evidence
               ) -> tuple[dict[str, torch.Tensor], dict[str, dict[str, Answer]]]:
    """Autograd's Jacobian and the exact references' (computed once: refinement changes only
    estimates)."""
    entries = _entries(prepared, evidence)
    if prepared.request.command == "jacobian" and entries > MAX_JACOBIAN_ENTRIES:
        raise UsageError(f"the Jacobian has {entries:,} entries; `jacobian` is for small "
                         f"sizes (at most {MAX_JACOBIAN_ENTRIES:,}); use `check` or `jvp`")
    shape = tuple(evidence.backward.engine.output.shape)
    exact = {r.name: r.jacobian(shape) for r in _references_for(evidence, "jacobian")
             if r.exact}
    return evidence.backward.engine.jacobian(), exact


def _refined(references: Sequence[Reference], views: Sequence[View], tol: Tolerance
             ) -> tuple[tuple[Reference, ...], list[str]]:
    """References whose two-point estimates behind any raw mismatch are refined, and those
    behind an `ok` that rests on the estimate's own error bound (`_leaned`); the inputs whose
    estimates were doubted (none, or none refined: nothing to lay out again)."""
    doubted: dict[str, torch.Tensor] = {}
    finite = next((r for r in references if isinstance(r, Finite)), None)
    if finite is None:
        return tuple(references), []
    exact = {r.name for r in references if r.exact and r.ran}
    for view in views:
        for name, cmp in view.raw.items():
            est = finite.estimates.get(name)
            if est is None or est.points is None or finite.name not in view.answers[name]:
                continue
            # (an exact answer for every element judges them whatever the estimate's bound)
            judged = any(e in exact and a.checked is None for e, a in view.answers[name].items())
            mask = None if judged else _leaned(view, name, finite.name, tol, est.points.shape)
            if cmp.has(Status.MISMATCH):
                wrong = view.mismatched(name, est.points.shape)
                mask = wrong if mask is None else mask | wrong
            if mask is None:
                continue
            mask = mask.reshape(est.points.shape).to(est.points.device) & (est.points == 2)
            doubted[name] = doubted[name] | mask if name in doubted else mask
    if not doubted:
        return tuple(references), []
    new, count = finite.refined(doubted)
    return tuple(new if r is finite else r for r in references), list(doubted) if count else []


def _leaned(view: View, name: str, engine: str, tol: Tolerance, shape: Sequence[int]
            ) -> torch.Tensor | None:
    """Input-shaped: the elements whose comparison with a finite-difference estimate passed
    only by the estimate's error bound, where that bound is wider than the tolerance itself
    (a float32 or float16 target at a step too small for it: a central difference of 0 ± 30
    "agrees" with any gradient). None: no such element."""
    answer = view.answers[name][engine]
    if answer.error is None:
        return None
    ref = answer.values
    strict = tol.atol_for(ref)
    if not float(answer.error.max().nan_to_num(0.0)) * FD_ERROR_FACTOR > strict:
        return None  # (one pass: the bounds of a float64 estimate sit far below any atol)
    ag = view.autograd[name].detach().to(ref.device, ref.dtype)
    limit = ref.abs().mul_(tol.rtol).add_(strict)
    leaned = (ag.sub(ref).abs_() > limit) & (answer.error * FD_ERROR_FACTOR > limit)
    leaned &= view.raw[name].status.to(leaned.device) == Status.OK.code
    return view.elements(leaned, shape) if bool(leaned.any()) else None


# ------------------------------------------------------------------ more evidence
def _forward(prepared: Prepared, evidence: Evidence) -> Forward | None:
    """jvp --tangent: J·t from torch forward AD, beside the references'."""
    bound, autograd = prepared.bound, evidence.backward.engine
    if prepared.request.command != "jvp" or not bound.tangent:
        return None
    tangents = tangents_for(bound.tangent, autograd.leaves, prepared.options.seed)
    try:
        ag = autograd.jvp({n: t.to(autograd.leaves[n].dtype) for n, t in tangents.items()})
        skipped = None
    except GradscopeError:
        raise
    except Exception as exc:  # e.g. a custom Function without forward-mode support
        ag, skipped = None, f"torch forward AD failed: {str(exc).splitlines()[0][:160]}"
    answers, refused = {}, {}
    for reference in (r for r in evidence.references if r.ran):
        try:  # (the target may reject points along the tangent)
            answers[reference.name] = reference.jvp(tangents)
        except TargetError as exc:
            refused[reference.name] = f"the target failed at a perturbed point: {rejection(exc)}"
    return Forward(tangents, ag, skipped, {n: a for n, a in answers.items() if a is not None},
                   refused)


def _accumulation(prepared: Prepared, evidence: Evidence) -> Accumulation | None:
    """seeds/003: .grad after N backward calls with retain_graph=True."""
    repeat = prepared.options.repeat
    if prepared.request.command != "jvp" or repeat <= 1:
        return None
    back = evidence.backward
    return Accumulation(repeat, back.engine.accumulate(back.upstream, repeat))


@contextmanager
def _timed(timings: dict[str, float], name: str, target: Any = None):
    """Seconds under `name` (or a name the block appends), and with `target` how many calls
    of the user's code the block made (`calls.NAME`)."""
    tic, calls, named = time.perf_counter(), target.calls if target else 0, [name]
    yield named
    timings[named[-1]] = time.perf_counter() - tic
    if target is not None and target.runs_user_code:
        timings[f"calls.{named[-1]}"] = target.calls - calls
    if (peak := gpu_peak()) is not None:
        timings[f"gpu_peak.{named[-1]}"] = peak


__all__ = ["Backward", "Evidence", "View", "backward", "computed_in", "gather"]
