"""The excuses stage: everything that may change what a disagreement means, computed up front
from the evidence, before anything is judged — the inputs the user declared surrogates, where
a hand-written backward is not linear in grad_output (never excused), which inputs lie below a
vanishing op, and where the forward is flat (finite differences zero, no kink in the stencil)
and, for the flat elements a raw comparison found wrong, whether the forward moves there at
other values (a step: a surrogate may be at work) or ignores them altogether; and whether such a
surrogate is consistent with the forward at a coarse scale (diagnose/coarse.py): one that is
not is never excused, unless declared; a declared one with an intended form is compared with
that form's gradient instead, element by element; and where a disagreement is torch's own
documented departure from the derivative (diagnose/departures.py: an embedding's padding_idx),
which autograd with the departure undone shows."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch

from gradscope.diagnose import custom_backward, departures, flow, surrogates, vanishing
from gradscope.diagnose.coarse import AGAINST, SCALED
from gradscope.diagnose.sweep import (
    MAX_ELEMENTWISE_LINES,
    MAX_IGNORED_LINES,
    MAX_INPUTS,
    MAX_LINES,
    Coarse,
    Sweep,
    span,
)
from gradscope.engines.autograd import AutogradEngine
from gradscope.engines.base import Answer
from gradscope.errors import TargetError, UsageError
from gradscope.report.model import Diagnostic
from gradscope.report.status import Status
from gradscope.runner.composition import Composition
from gradscope.runner.evidence import Evidence, composed_over
from gradscope.runner.prepare import Prepared
from gradscope.runner.projections import Projection, projected
from gradscope.verdict.compare import Comparison, compare


@dataclass(frozen=True)
class Excuses:
    declared: dict[str, str] = field(default_factory=dict)  # input → why it is a surrogate
    nonlinear: dict[str, torch.Tensor] = field(default_factory=dict)  # never surrogates
    # the custom-backward checks that failed (in place, nondeterministic, not linear)
    findings: tuple[Diagnostic, ...] = ()
    # inputs below a vanishing point where the function is not constant (all such points,
    # for the findings) and those below a known piecewise-constant op (their ok zeros are
    # `vanishing`)
    confirmed: frozenset[str] = frozenset()
    vanishing: frozenset[str] = frozenset()
    # where the forward does not move (only computed for inputs a comparison found wrong)
    flat: dict[str, torch.Tensor | None] = field(default_factory=dict)
    stepped: dict[str, torch.Tensor] = field(default_factory=dict)  # flat, forward moves
    ignored: dict[str, torch.Tensor] = field(default_factory=dict)  # probed, forward ignores
    # the coarse-scale check of each stepped input's surrogate, and the elements it failed
    coarse: dict[str, Coarse] = field(default_factory=dict)
    inconsistent: dict[str, torch.Tensor] = field(default_factory=dict)
    # a declared surrogate's intended form: autograd compared with its gradient, per view
    intended: dict[str, dict[str, Comparison]] = field(default_factory=dict)
    unswept: tuple[str, ...] = ()  # inputs with surrogate elements past MAX_INPUTS: unchecked
    # inputs whose probes the target refused (how): gradscope's own tries, never its failure
    refused: dict[str, str] = field(default_factory=dict)
    # torch's documented departures in effect (diagnose/departures.py), and where each view's
    # mismatches are one: {input: {view label: mask}}
    departures: tuple[departures.Departure, ...] = ()
    departed: dict[str, dict[str, torch.Tensor]] = field(default_factory=dict)
    # the projections that disagreed, run again against autograd with the departures undone,
    # where they then agree: a model at scale's composition, each sampled input's projections
    composition: Composition | None = None
    projections: dict[tuple[str, int], Projection] = field(default_factory=dict)


def excuse(prepared: Prepared, evidence: Evidence) -> Excuses:
    back = evidence.backward
    declared = _declared(prepared, evidence)
    if back.grads is None:
        return Excuses(declared)
    intended = _intended(prepared, evidence, declared)
    findings, nonlinear = _backward_checks(prepared, evidence)
    probed, below_catalogue = _vanishing(prepared, evidence)
    confirmed = probed.names
    # only where a raw comparison found a mismatch can flatness excuse anything
    wrong = {n for view in evidence.views for n, c in view.raw.items() if c.has(Status.MISMATCH)}
    flat = {n: _flat(evidence, n, nonlinear) if n in wrong else None
            for n in prepared.target.names}
    stepped, ignored = _probed(prepared, evidence, flat)
    coarse, unswept = _coarse(prepared, evidence, stepped)
    inconsistent = {n: _failed(c, stepped[n]) for n, c in coarse.items()}
    return Excuses(declared, nonlinear, findings, confirmed, confirmed & below_catalogue, flat,
                   stepped, ignored, coarse, {n: m for n, m in inconsistent.items()
                                              if bool(m.any())}, intended, unswept,
                   probed.refused, **vars(_departed(prepared, evidence, wrong)))


def _declared(prepared: Prepared, evidence: Evidence) -> dict[str, str]:
    """The inputs whose gradient the user declared a surrogate, and why: --surrogate, a
    marker on the target itself, or a marked Function in the graph."""
    engine = evidence.backward.engine
    marks = surrogates.marked_inputs(engine.output, engine.leaves)
    return surrogates.declared(prepared.options.surrogate, prepared.target.names,
                               prepared.target.marker(), marks)


def _intended(prepared: Prepared, evidence: Evidence, declared: dict[str, str]
              ) -> dict[str, dict[str, Comparison]]:
    """autograd of each declared input with an intended form, compared element by element
    with that form's own gradient (autograd of it, in float64) in every view: {input: {view
    label: comparison}}."""
    out: dict[str, dict[str, Comparison]] = {}
    shape = tuple(evidence.backward.upstream.shape)
    for name, intended in prepared.intended.items():
        if name not in declared:
            continue
        engine = AutogradEngine(intended.forward, prepared.bound.exact)
        if tuple(engine.output.shape) != shape:
            raise UsageError(f"{intended.text} gives shape {tuple(engine.output.shape)} where "
                             f"the target gives {shape}: the intended form must have the "
                             "target's output shape")
        out[name] = {}
        for view in evidence.views:
            want = engine.jacobian()[name] if view.jacobian else \
                engine.vjp(view.upstream.to(engine.output.dtype))[name]
            out[name][view.label] = compare(view.autograd[name], [Answer(want, None)],
                                            evidence.tol)
    return out


@dataclass(frozen=True)
class _Departed:
    """What torch's documented departures excuse (the Excuses fields of the same names)."""

    departures: tuple[departures.Departure, ...] = ()
    departed: dict[str, dict[str, torch.Tensor]] = field(default_factory=dict)
    composition: Composition | None = None
    projections: dict[tuple[str, int], Projection] = field(default_factory=dict)


def _departed(prepared: Prepared, evidence: Evidence, wrong: set[str]) -> _Departed:
    """Where a disagreement is torch's documented departure from the derivative: autograd of
    the forward with the departures undone agrees with the references there, element by
    element in each view, and the projections that disagreed agree against it (only run where
    something disagreed; a forward that then fails excuses nothing)."""
    projected_wrong = {(p.name, p.index) for p in evidence.projections
                       if not p.kinked and not p.rejected and not p.difference <= p.slack}
    composed_wrong = evidence.composition is not None and evidence.composition.compared \
        and not evidence.composition.agrees
    if not (wrong or projected_wrong or composed_wrong) or not _in_effect(prepared):
        return _Departed()
    seen = departures.Undone()
    try:
        engine = AutogradEngine(departures.undone(prepared.target.forward, seen),
                                prepared.bound.exact)
        if not seen.found:
            return _Departed()
        departed = _departed_views(evidence, engine, wrong)
        back = evidence.backward
        grads = engine.vjp(back.upstream.to(engine.output.dtype))
    except (TargetError, UsageError):
        return _Departed()
    undone = replace(evidence, backward=replace(back, grads=grads))
    again = composed_over(prepared, undone) if composed_wrong else None
    agreeing = {(p.name, p.index): p for p in projected(prepared, undone)
                if (p.name, p.index) in projected_wrong and p.difference <= p.slack} \
        if projected_wrong else {}
    return _Departed(tuple(dict.fromkeys(seen.found)), departed,
                     again if again is not None and again.agrees else None, agreeing)


def composition(evidence: Evidence, excuses: Excuses) -> Composition | None:
    """The composition a model at scale is judged by: the one against autograd with torch's
    departures undone where only that one agrees, else autograd's own."""
    return excuses.composition or evidence.composition


def _in_effect(prepared: Prepared) -> bool:
    """Whether any of torch's departures is in effect, from a forward without a graph or a
    copy of the inputs (a model of 10⁸ parameters holds neither twice for nothing); code
    that refuses to run without gradients is asked with them, by the caller."""
    seen = departures.Undone()
    try:
        with torch.no_grad():
            departures.undone(prepared.target.forward, seen)(prepared.bound.exact)
    except (TargetError, UsageError):
        return True
    return bool(seen.found)


def _departed_views(evidence: Evidence, engine: AutogradEngine, wrong: set[str]
                    ) -> dict[str, dict[str, torch.Tensor]]:
    """Per input and view, the mismatches where autograd with the departures undone agrees
    with the references."""
    out: dict[str, dict[str, torch.Tensor]] = {}
    for view in evidence.views:
        names = [n for n in wrong if view.raw[n].has(Status.MISMATCH)]
        if not names:
            continue
        grads = engine.jacobian() if view.jacobian else \
            engine.vjp(view.upstream.to(engine.output.dtype))  # type: ignore[union-attr]
        for name in names:
            undone = compare(grads[name], list(view.answers[name].values()), evidence.tol)
            mask = (view.raw[name].status == Status.MISMATCH.code) & (
                undone.status == Status.OK.code)
            if bool(mask.any()):
                out.setdefault(name, {})[view.label] = mask
    return out


def _backward_checks(prepared: Prepared, evidence: Evidence
                     ) -> tuple[tuple[Diagnostic, ...], dict[str, torch.Tensor]]:
    """Linearity, determinism and in-place checks of a hand-written backward."""
    if not prepared.target.checks_backward:
        return (), {}
    back = evidence.backward
    assert back.grads is not None
    return custom_backward.backward_checks(
        prepared.target.text, back.engine, back.upstream, back.after, back.grads,
        evidence.tol, prepared.options.seed, prepared.options.nondet_tol)


def _vanishing(prepared: Prepared, evidence: Evidence
               ) -> tuple[vanishing.Confirmed, frozenset[str]]:
    """Any op that blocks the gradient of an input the function really depends on is reported;
    only a known piecewise-constant op marks elements `vanishing` (a zero from an unknown op
    can be the true derivative, e.g. tanh saturated to 1.0)."""
    traced = evidence.backward.flow
    if traced is None:
        return vanishing.Confirmed(frozenset(), {}), frozenset()
    finite = evidence.finite
    values = finite.fd.values if finite is not None and finite.fd is not None \
        else prepared.bound.exact
    confirmed = vanishing.confirm(prepared.target.forward, values,
                                  flow.vanishing_inputs(traced), evidence.backward.upstream)
    return confirmed, frozenset(flow.vanishing_inputs(traced, catalogue_only=True))


def _flat(evidence: Evidence, name: str, nonlinear: dict[str, torch.Tensor]
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


def _probed(prepared: Prepared, evidence: Evidence, flat: dict[str, torch.Tensor | None]
            ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """For the flat elements any raw comparison found wrong: does the forward move when the
    element takes other values (a step: True in `stepped`) or not at any value tried (it
    ignores them: True in `ignored`)? Only those are probed."""
    finite = evidence.finite
    stepped: dict[str, torch.Tensor] = {}
    ignored: dict[str, torch.Tensor] = {}
    if finite is None or finite.fd is None:
        return stepped, ignored
    for name, mask in flat.items():
        if mask is None or not bool(mask.any()):
            continue
        wrong = torch.zeros_like(mask)
        for view in evidence.views:
            raw = view.raw[name]
            if not raw.has(Status.MISMATCH):
                continue
            bad = raw.status == Status.MISMATCH.code
            wrong |= (bad.any(0) if view.jacobian else bad).reshape(mask.shape).to(mask.device)
        todo = torch.nonzero((mask & wrong).reshape(-1)).reshape(-1)
        if not todo.numel():
            continue
        moves = finite.fd.depends(name, todo)
        if not bool(moves.all()):  # what the probe values missed, a line of them may find
            moves = _along_lines(prepared, evidence, name, todo, moves)
        stepped[name] = torch.zeros_like(mask)
        ignored[name] = torch.zeros_like(mask)
        stepped[name].view(-1)[todo] = moves
        ignored[name].view(-1)[todo] = ~moves
    return stepped, ignored


def _along_lines(prepared: Prepared, evidence: Evidence, name: str, todo: torch.Tensor,
                 moves: torch.Tensor) -> torch.Tensor:
    """`moves`, with up to MAX_IGNORED_LINES of the elements the probes found ignored checked
    along a line each (a forward that moves there is piecewise constant, not ignoring)."""
    fd = evidence.finite.fd  # type: ignore[union-attr]
    x = fd.values[name]
    cost = max(x.numel(), fd.out.numel(), fd.point.activations())
    sweep = Sweep(prepared.target.forward, fd.values, name, evidence.backward.upstream, cost)
    low, high = span(x, prepared.target.domain(name))
    idle = torch.nonzero(~moves).reshape(-1)[:MAX_IGNORED_LINES]
    moves = moves.clone()
    moves[idle] = sweep.moves(todo[idle].cpu(), low, high).to(moves.device)
    return moves


def _coarse(prepared: Prepared, evidence: Evidence, stepped: dict[str, torch.Tensor]
            ) -> tuple[dict[str, Coarse], tuple[str, ...]]:
    """The coarse-scale check of every input with stepped elements where autograd is not
    zero (a surrogate at work), MAX_INPUTS of them at most (the most such elements first):
    along lines through seeded ones among them, all moved at once where each output element
    follows its own input element (up to MAX_ELEMENTWISE_LINES), else one at a time
    (MAX_LINES). Also the inputs left unswept."""
    finite, grads = evidence.finite, evidence.backward.grads
    if finite is None or finite.fd is None or grads is None:
        return {}, ()
    fd = finite.fd
    out: dict[str, Coarse] = {}
    found = {n: m & (grads[n].to(m.device) != 0) for n, m in stepped.items()}
    busiest = sorted((n for n in found if bool(found[n].any())),
                     key=lambda n: -int(found[n].sum()))
    for name in busiest[:MAX_INPUTS]:
        candidates = found[name]
        x = fd.values[name]
        cost = max(x.numel(), fd.out.numel(), fd.point.activations())
        sweep = Sweep(prepared.target.forward, fd.values, name, evidence.backward.upstream,
                      cost)
        low, high = span(x, prepared.target.domain(name))
        if not high > low:
            continue
        lines = MAX_ELEMENTWISE_LINES if sweep.probe(low, high) else MAX_LINES
        where = torch.nonzero(candidates.reshape(-1).cpu()).reshape(-1)
        gen = torch.Generator().manual_seed(prepared.options.seed)
        elements = where[torch.randperm(len(where), generator=gen)[:lines]].sort().values
        out[name] = sweep.check(elements, low, high)
    return out, tuple(busiest[MAX_INPUTS:])


def _failed(coarse: Coarse, stepped: torch.Tensor) -> torch.Tensor:
    """Input-shaped: the stepped elements whose own line found the surrogate inconsistent;
    all of them where lines through a few elements alone all did (the same surrogate)."""
    bad = (coarse.reading.verdict == AGAINST) | (coarse.reading.verdict == SCALED)
    if not coarse.together and bool(bad.all()):
        return stepped.clone()
    mask = torch.zeros(stepped.numel(), dtype=torch.bool)
    mask[coarse.elements[bad]] = True
    return mask.reshape(stepped.shape).to(stepped.device) & stepped
