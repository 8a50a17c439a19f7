"""Surrogate gradients, by declaration and by behaviour (explain/surrogates.py writes what one
looks like; explain/sweep.py and coarse.py read the lines a coarse-scale check runs).

* Declared: `--surrogate`, a marker on the target, a marked Function in the graph. A declared
  input's mismatches are `surrogate`; with an intended form, only where autograd is that
  form's gradient (element by element in every view).
* Behavioural: where the forward is flat (finite differences zero, no kink in the stencil) and
  a raw comparison found autograd wrong, the forward is probed at other values: one that moves
  there is a step, its gradient a surrogate — if consistent with the forward at a coarse scale
  (lines of values through seeded elements). The flatness, the move and the coarse agreement
  are the excuse's proof; an inconsistent surrogate, or one where backward is not linear, is
  never excused. A forward that ignores the elements at every value is no step."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import torch

from gradscope.compare.elements import Comparison, compare
from gradscope.engines.autograd import AutogradEngine
from gradscope.engines.base import Answer
from gradscope.errors import UsageError
from gradscope.evidence.gather import Evidence, View
from gradscope.explain import relations, surrogates
from gradscope.explain.coarse import CONSISTENT, UNKNOWN, failing
from gradscope.explain.relations import Relation
from gradscope.explain.sweep import (
    MAX_ELEMENTWISE_LINES,
    MAX_IGNORED_LINES,
    MAX_INPUTS,
    MAX_LINES,
    Coarse,
    Sweep,
    span,
)
from gradscope.expr.parse import parse
from gradscope.features import backwards, base
from gradscope.features.base import Context, Diagnosis, Feature, Interim, value_of, wrong_inputs
from gradscope.report.model import NamedCheck
from gradscope.report.status import Status
from gradscope.targets import ExpressionTarget


@dataclass(frozen=True)
class SurrogateFacts:
    declared: dict[str, str] = field(default_factory=dict)  # input → why it is a surrogate
    # a declared surrogate's intended form (how it was declared), and autograd compared with
    # its gradient per view
    forms: dict[str, str] = field(default_factory=dict)
    intended: dict[str, dict[str, Comparison]] = field(default_factory=dict)
    # how autograd departs from an intended form it does not follow (a factor, a sign, …)
    astray: dict[str, Relation] = field(default_factory=dict)
    # where the forward does not move (only computed for inputs a comparison found wrong)
    flat: dict[str, torch.Tensor | None] = field(default_factory=dict)
    stepped: dict[str, torch.Tensor] = field(default_factory=dict)  # flat, forward moves
    ignored: dict[str, torch.Tensor] = field(default_factory=dict)  # probed, forward ignores
    # the coarse-scale check of each stepped input's surrogate, and the elements it failed
    coarse: dict[str, Coarse] = field(default_factory=dict)
    inconsistent: dict[str, torch.Tensor] = field(default_factory=dict)
    unswept: tuple[str, ...] = ()  # inputs with surrogate elements past MAX_INPUTS: unchecked


class Surrogates(Feature["SurrogateFacts"]):
    name = "surrogates"
    fields: ClassVar[Mapping[str, Any]] = {"declared": {}}  # input → why declared
    needs = (backwards, base.later("relations"))

    def facts(self, ctx: Context) -> SurrogateFacts:
        declared = _declared(ctx)
        if ctx.evidence.backward.grads is None:
            return SurrogateFacts(declared)
        forms, intended, astray = _intended(ctx, declared)
        checks = ctx.of(backwards.FEATURE)
        nonlinear = checks.nonlinear if checks is not None else {}
        wrong = wrong_inputs(ctx.evidence)  # only there can flatness excuse anything
        flat = {n: _flat(ctx.evidence, n, nonlinear) if n in wrong else None
                for n in ctx.prepared.target.names}
        stepped, ignored = _probed(ctx, flat)
        coarse, unswept = _coarse(ctx, stepped)
        inconsistent = {n: m for n, c in coarse.items()
                        for m in [_failed(c, stepped[n])] if bool(m.any())}
        return SurrogateFacts(declared, forms, intended, astray, flat, stepped, ignored,
                              coarse, inconsistent, unswept)

    def explain(self, ctx: Context, name: str, view: View, cmp: Comparison) -> Comparison:
        """A step's surrogate: mismatches where the forward is flat and moves elsewhere, but
        never those whose coarse-scale check failed (unless declared)."""
        facts: SurrogateFacts = ctx.of(self)
        flat = facts.flat.get(name)
        if flat is None or not cmp.has(Status.MISMATCH) or name not in facts.stepped:
            return cmp
        if name not in facts.declared and not _proved(facts.coarse.get(name)):
            return cmp  # (an excuse carries its proof: no consistent line, no surrogate)
        stepped = flat & view.mismatched(name, flat.shape).to(flat.device) & \
            facts.stepped[name].to(flat.device)
        if name in facts.inconsistent and name not in facts.declared:
            stepped &= ~facts.inconsistent[name].to(flat.device)  # never excused
        return cmp.surrogate(view.entries(stepped))

    def declared(self, ctx: Context, name: str, view: View, cmp: Comparison) -> Comparison:
        """A declared input's mismatches: everywhere, or, with an intended form, where
        autograd is that form's gradient."""
        facts: SurrogateFacts = ctx.of(self)
        if name not in facts.declared or not cmp.has(Status.MISMATCH):
            return cmp
        intended = facts.intended.get(name)
        where = torch.ones((), dtype=torch.bool) if intended is None else \
            intended[view.label].status != Status.MISMATCH.code
        return cmp.surrogate(where)

    def checks(self, ctx: Context, decided: Interim) -> list[NamedCheck]:
        """Each declared surrogate's intended form, compared element by element per view."""
        facts: SurrogateFacts = ctx.of(self)
        out = []
        for name, views in facts.intended.items():
            bad = sum(int((c.status == Status.MISMATCH.code).sum()) for c in views.values())
            worst = max((c.max_abs_error() for c in views.values()), default=0.0)
            word = Status.MISMATCH if bad else Status.SURROGATE
            how = facts.astray.get(name)
            out.append(NamedCheck(f"{name} against its intended surrogate "
                                  f"({facts.forms[name]})" + (f": {how.text}" if how else ""),
                                  word, worst, bad, {name: word}))
        return out

    def diagnose(self, ctx: Context, verdict: Any, said: Mapping[str, Diagnosis]) -> Diagnosis:
        """The `surrogate_gradient` diagnostic (what each surrogate looks like, or the
        relation a declared one follows), and a note for a declaration that was not needed."""
        facts: SurrogateFacts = ctx.of(self)
        # every element judged surrogate in any comparison (the random upstreams and the
        # Jacobian can show one the ones upstream hides, as a hard Gumbel-softmax's)
        counts = {n: int(m.sum()) for n, m in verdict.surrogate_elements.items()}
        from gradscope.features import relations as related  # (it imports this one)

        explained: Mapping[str, Relation] = value_of(said, related.FEATURE) or {}
        found = []
        if any(counts.values()):
            shapes = {n: _looks(ctx, facts, verdict, n) for n, c in counts.items()
                      if c and n not in facts.declared and n in verdict.table}
            found.append(surrogates.diagnostic(
                ctx.prepared.target.text, counts, shapes, facts.declared,
                {**{n: r.message for n, r in explained.items()},
                 **{n: f"but autograd is not its intended form ({r.text}): the check against "
                       "that form fails" for n, r in facts.astray.items()}}, set(facts.astray)))
        notes = [f"{name} was declared a surrogate ({why}), but its gradient agrees with the "
                 "derivative: the declaration is not needed"
                 for name, why in facts.declared.items() if not counts.get(name)]
        if facts.unswept:
            notes.append(f"the surrogates of {', '.join(facts.unswept)} were not checked at a "
                         f"coarse scale (the {len(facts.coarse)} inputs with the most "
                         "surrogate elements were): check them on their own with --only NAME")
        return Diagnosis(tuple(found), tuple(notes))

    def reported(self, ctx: Context, inputs: Any) -> dict[str, Any]:
        facts = ctx.of(self)
        return {"declared": dict(facts.declared)} if facts is not None else {}


FEATURE = Surrogates()


def inconsistency(ctx: Context, name: str) -> Relation | None:
    """How the surrogate of `name` fails the coarse-scale check, if it does (and is not
    declared): the relation its mismatches follow."""
    facts: SurrogateFacts | None = ctx.of(FEATURE)
    if facts is None or name in facts.declared:
        return None
    coarse, bad = facts.coarse.get(name), facts.inconsistent.get(name)
    if coarse is None or bad is None:
        return None
    on = bad.reshape(-1).cpu()[coarse.elements]
    lines = torch.where(on, coarse.reading.verdict, torch.zeros_like(coarse.reading.verdict))
    return surrogates.inconsistency(coarse, lines)


def _looks(ctx: Context, facts: SurrogateFacts, verdict: Any, name: str) -> str:
    """What the surrogate of `name` looks like, and whether it is consistent at a coarse
    scale."""
    mask = verdict.table[name].status == Status.SURROGATE.code
    coarse = facts.coarse.get(name)
    lines = verdict.surrogate_elements[name].reshape(-1).cpu()[coarse.elements] \
        if coarse is not None else torch.zeros(0, dtype=torch.bool)
    gate = surrogates.gate(coarse, int(torch.nonzero(lines)[0])) \
        if coarse is not None and bool(lines.any()) else None
    said = surrogates.shape_of(ctx.evidence.backward.grads[name], ctx.prepared.bound.cast[name],
                               mask, facts.flat.get(name), gate)
    if coarse is not None:
        consistent = surrogates.consistency(coarse, lines)
        said += f"; {consistent}" if consistent else ""
    return said


# ------------------------------------------------------------------ declared
def _declared(ctx: Context) -> dict[str, str]:
    """The inputs whose gradient the user declared a surrogate, and why: --surrogate, a
    marker on the target itself, or a marked Function in the graph."""
    engine, target = ctx.evidence.backward.engine, ctx.prepared.target
    marks = surrogates.marked_inputs(engine.output, engine.leaves)
    return surrogates.declared(ctx.prepared.options.surrogates, target.names, target.marker(),
                               marks)


def _intended(ctx: Context, declared: Mapping[str, str]
              ) -> tuple[dict[str, str], dict[str, dict[str, Comparison]], dict[str, Relation]]:
    """Each declared input with an intended form (`--surrogate NAME=EXPRESSION`, an expression
    over the target's inputs parsed like any other, or `reference=` on the target's own
    marker): how it was declared, autograd compared element by element with that form's own
    gradient (autograd of it, in float64) in every view ({input: {view label: cmp}}), and,
    where autograd does not follow it, how (read from the first view that shows it)."""
    target, evidence = ctx.prepared.target, ctx.evidence
    forms: dict[str, tuple[str, Any]] = {}
    reference = target.surrogate_reference()
    if reference is not None:
        forms = {n: ("declared in code", reference) for n in target.names}
    for name, text in ctx.prepared.options.surrogates.forms.items():
        expression = ExpressionTarget(text, parse(text))
        unknown = [n for n in expression.names if n not in target.names]
        if unknown:
            raise UsageError(f"--surrogate {name}={text} uses `{unknown[0]}`, which is not an "
                             f"input of the target; inputs are: {', '.join(target.names)}")
        forms[name] = (f"--surrogate {name}={text}", expression.forward)
    shape = tuple(evidence.backward.upstream.shape)
    said: dict[str, str] = {}
    out: dict[str, dict[str, Comparison]] = {}
    astray: dict[str, Relation] = {}
    for name, (how, forward) in forms.items():
        if name not in declared:
            continue
        engine = AutogradEngine(forward, ctx.prepared.bound.exact)
        if tuple(engine.output.shape) != shape:
            text = how if how.startswith("--") else "the reference declared in code"
            raise UsageError(f"{text} gives shape {tuple(engine.output.shape)} where the "
                             f"target gives {shape}: the intended form must have the "
                             "target's output shape")
        said[name], out[name] = how, {}
        for view in evidence.views:
            want = engine.jacobian()[name] if view.jacobian else \
                engine.vjp(view.upstream.to(engine.output.dtype))[name]
            cmp = compare(view.autograd[name], [Answer(want, None)], evidence.tol)
            out[name][view.label] = cmp
            if name not in astray and cmp.has(Status.MISMATCH):
                rel = _astray(ctx, name, view, want, cmp)
                if rel is not None:
                    astray[name] = rel
    return said, out, astray


def _astray(ctx: Context, name: str, view: View, want: torch.Tensor, cmp: Comparison
            ) -> Relation | None:
    """How autograd relates to the intended form's gradient where it does not follow it (a
    factor: ×25, ×¼; a sign; a missing term), said of the intended gradient."""
    cast = ctx.prepared.bound.cast
    sizes = relations.sizes_of(tuple(ctx.evidence.backward.engine.output.shape),
                               {n: tuple(cast[n].shape) for n in ctx.prepared.target.names})
    found = relations.find(name, relations.Arrays(view.autograd[name], want, None, cmp.status),
                           ctx.evidence.tol, sizes, numbers=ctx.prepared.target.numbers())
    if found is None:
        return None
    return replace(found, text=found.text.replace("the derivative", "the intended gradient"))


# ------------------------------------------------------------------ behavioural
def _flat(evidence: Evidence, name: str, nonlinear: Mapping[str, torch.Tensor]
          ) -> torch.Tensor | None:
    """Input-shaped mask of the elements where the forward does not move: finite
    differences estimated their column, it is zero within its error, and its stencil crossed
    no kink or jump (None: no estimate)."""
    finite = evidence.finite
    est = finite.estimates.get(name) if finite is not None else None
    if est is None:
        return None
    # "zero" is relative to the input's own derivatives: a model whose gradients are 1e-8
    # everywhere has columns below atol that are not flat at all
    tol = evidence.tol
    values = est.partial[torch.isfinite(est.partial)]
    scale = float(values.abs().max()) if values.numel() else 0.0
    atol = tol.atol if scale <= tol.atol else min(tol.atol, tol.rtol * scale)
    mask = ~est.nonconstant(atol) & ~est.kink
    if est.checked is not None:
        mask &= est.checked
    if name in nonlinear:
        mask &= ~nonlinear[name].to(mask.device)
    return mask


def _probed(ctx: Context, flat: Mapping[str, torch.Tensor | None]
            ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """For the flat elements any raw comparison found wrong: does the forward move when the
    element takes other values (a step: True in `stepped`) or not at any value tried (it
    ignores them: True in `ignored`)? Only those are probed."""
    finite = ctx.evidence.finite
    stepped: dict[str, torch.Tensor] = {}
    ignored: dict[str, torch.Tensor] = {}
    if finite is None or finite.fd is None:
        return stepped, ignored
    for name, mask in flat.items():
        if mask is None or not bool(mask.any()):
            continue
        wrong = torch.zeros_like(mask)
        for view in ctx.evidence.views:
            if view.raw[name].has(Status.MISMATCH):
                wrong |= view.mismatched(name, mask.shape).to(mask.device)
        todo = torch.nonzero((mask & wrong).reshape(-1)).reshape(-1)
        if not todo.numel():
            continue
        moves = finite.fd.depends(name, todo)
        if not bool(moves.all()):  # what the probe values missed, a line of them may find
            moves = _along_lines(ctx, name, todo, moves)
        stepped[name] = torch.zeros_like(mask)
        ignored[name] = torch.zeros_like(mask)
        stepped[name].view(-1)[todo] = moves
        ignored[name].view(-1)[todo] = ~moves
    return stepped, ignored


def _proved(coarse: Coarse | None) -> bool:
    """A coarse-scale check ran and found the surrogate consistent on some line."""
    return coarse is not None and bool((coarse.reading.verdict == CONSISTENT).any())


def _sweep(ctx: Context, name: str, upstream: torch.Tensor | None = None
           ) -> tuple[Sweep, float, float]:
    """A sweep of `name` along lines of values (vᵀf for `upstream`, default the run's), and
    the span they cover."""
    fd = ctx.evidence.finite.fd  # type: ignore[union-attr]
    x = fd.values[name]
    cost = max(x.numel(), fd.out.numel(), fd.point.activations())
    sweep = Sweep(ctx.prepared.target.forward, fd.values, name,
                  ctx.evidence.backward.upstream if upstream is None else upstream, cost)
    low, high = span(x, ctx.prepared.target.domain(name))
    return sweep, low, high


def _along_lines(ctx: Context, name: str, todo: torch.Tensor, moves: torch.Tensor
                 ) -> torch.Tensor:
    """`moves`, with up to MAX_IGNORED_LINES of the elements the probes found ignored checked
    along a line each (a forward that moves there is piecewise constant, not ignoring)."""
    sweep, low, high = _sweep(ctx, name)
    idle = torch.nonzero(~moves).reshape(-1)[:MAX_IGNORED_LINES]
    moves = moves.clone()
    moves[idle] = sweep.moves(todo[idle].cpu(), low, high).to(moves.device)
    return moves


def _coarse(ctx: Context, stepped: Mapping[str, torch.Tensor]
            ) -> tuple[dict[str, Coarse], tuple[str, ...]]:
    """The coarse-scale check of every input with stepped elements where autograd is not
    zero (a surrogate at work), MAX_INPUTS of them at most (the most such elements first):
    along lines through seeded ones among them, all moved at once where each output element
    follows its own input element (up to MAX_ELEMENTWISE_LINES), else one at a time
    (MAX_LINES). Also the inputs left unswept."""
    finite, grads = ctx.evidence.finite, ctx.evidence.backward.grads
    if finite is None or finite.fd is None or grads is None:
        return {}, ()
    out: dict[str, Coarse] = {}
    found: dict[str, list[tuple[torch.Tensor, torch.Tensor]]] = {}
    for n, m in stepped.items():  # (under the first upstream whose comparison shows it: a
        # hard Gumbel-softmax's surrogate sums to zero under ones, not under a random one)
        for view in ctx.evidence.views:
            hit = m & (view.autograd[n].to(m.device) != 0) & \
                view.mismatched(n, m.shape).to(m.device) if not view.jacobian else None
            if hit is not None and bool(hit.any()):
                found.setdefault(n, []).append((hit, view.upstream))  # type: ignore[arg-type]
    busiest = sorted(found, key=lambda n: -int(found[n][0][0].sum()))
    for name in busiest[:MAX_INPUTS]:  # (the next upstream where no line told: a top-k
        for hit, upstream in found[name]:  # mask's sum stays k, which ones cannot see)
            coarse = _lines(ctx, name, hit, upstream)
            if coarse is None:
                break
            out[name] = coarse
            if bool((coarse.reading.verdict != UNKNOWN).any()):
                break
    return out, tuple(busiest[MAX_INPUTS:])


def _lines(ctx: Context, name: str, hit: torch.Tensor, upstream: torch.Tensor
           ) -> Coarse | None:
    """`name`'s coarse-scale check under `upstream`, on lines through seeded `hit` elements
    (None: the input spans no range)."""
    sweep, low, high = _sweep(ctx, name, upstream)
    if not high > low:
        return None
    lines = MAX_ELEMENTWISE_LINES if sweep.probe(low, high) else MAX_LINES
    where = torch.nonzero(hit.reshape(-1).cpu()).reshape(-1)
    gen = torch.Generator().manual_seed(ctx.prepared.options.seed)
    elements = where[torch.randperm(len(where), generator=gen)[:lines]].sort().values
    return sweep.check(elements, low, high)


def _failed(coarse: Coarse, stepped: torch.Tensor) -> torch.Tensor:
    """Input-shaped: the stepped elements whose own line found the surrogate inconsistent;
    all of them where lines through a few elements alone all did (the same surrogate)."""
    bad = failing(coarse.reading.verdict)
    if not coarse.together and bool(bad.all()):
        return stepped.clone()
    mask = torch.zeros(stepped.numel(), dtype=torch.bool)
    mask[coarse.elements[bad]] = True
    return mask.reshape(stepped.shape).to(stepped.device) & stepped
