"""Torch's documented departures from the derivative (diagnose/departures.py: an embedding's
padding_idx, the triangle a function of a symmetric matrix reads): where a disagreement is one,
autograd of the forward with the departures undone agrees with the references there, element
by element in each view — that agreement is the excuse's proof — and the projections that
disagreed agree against it. Only run where something disagreed; a forward that then fails
excuses nothing. What it excuses is torch's, never counted as the user's surrogate."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from gradscope.diagnose import departures
from gradscope.engines.autograd import AutogradEngine
from gradscope.errors import TargetError, UsageError
from gradscope.evidence.gather import Evidence, View
from gradscope.evidence.prepare import Prepared
from gradscope.features import projections
from gradscope.features.base import Context, Feature, Said, wrong_inputs
from gradscope.report.status import Status
from gradscope.verdict.compare import Comparison, compare


@dataclass(frozen=True)
class DepartureFacts:
    """The departures in effect; per input and view, the mismatches that are one; the
    composition and the projections that agree against autograd with them undone."""

    departures: tuple[departures.Departure, ...] = ()
    departed: dict[str, dict[str, torch.Tensor]] = field(default_factory=dict)
    composition: projections.Composition | None = None
    projections: tuple[projections.Along, ...] = ()


class Departures(Feature):
    name = "departures"
    users = False  # (torch's departure, not the user's surrogate)

    def facts(self, ctx: Context) -> DepartureFacts | None:
        prepared, evidence = ctx.prepared, ctx.evidence
        if evidence.backward.grads is None:
            return None
        found = ctx.of(projections.FEATURE.name) or projections.ProjectionFacts()
        wrong = wrong_inputs(evidence)
        projected_wrong = {(p.names[0], p.index) for p in found.projections
                           if not p.kinked and not p.rejected and not p.difference <= p.slack}
        composed_wrong = found.composition is not None and found.composition.compared \
            and not found.composition.agrees
        if not (wrong or projected_wrong or composed_wrong) or not _in_effect(prepared):
            return None
        seen = departures.Undone()
        try:
            engine = AutogradEngine(departures.undone(prepared.target.forward, seen),
                                    prepared.bound.exact)
            if not seen.found:
                return None
            departed = _departed_views(evidence, engine, wrong)
            back = evidence.backward
            grads = engine.vjp(back.upstream.to(engine.output.dtype))
        except (TargetError, UsageError):
            return None
        undone = replace(back, grads=grads)
        finite = evidence.finite
        again = projections.composed_over(prepared, undone, finite, evidence.tol) \
            if composed_wrong and finite is not None else None
        agreeing = tuple(p for p in projections.projected(prepared, undone, finite,
                                                           evidence.tol)
                         if (p.names[0], p.index) in projected_wrong
                         and p.difference <= p.slack) \
            if projected_wrong and finite is not None else ()
        return DepartureFacts(tuple(dict.fromkeys(seen.found)), departed,
                     again if again is not None and again.agrees else None, agreeing)

    def explain(self, ctx: Context, name: str, view: View, cmp: Comparison) -> Comparison:
        facts = ctx.of(self.name)
        mask = facts.departed.get(name, {}).get(view.label) if facts is not None else None
        return cmp if mask is None else cmp.surrogate(mask)

    def diagnose(self, ctx: Context, verdict: Any, said: Mapping[str, Said]) -> Said:
        """The `documented_departure` diagnostic: the elements where autograd is torch's own
        documented departure from the derivative (each counted once, over every view)."""
        facts = ctx.of(self.name)
        if facts is None:
            return Said()
        counts = {}
        views = {v.label: v for v in ctx.evidence.views}
        for name, masks in facts.departed.items():
            shape = ctx.prepared.bound.cast[name].shape
            union = torch.zeros(shape, dtype=torch.bool)
            for label, mask in masks.items():
                union |= views[label].elements(mask, shape).cpu()
            counts[name] = int(union.sum())
        projected = facts.composition is not None or bool(facts.projections)
        if not any(counts.values()) and not projected:
            return Said()
        return Said((departures.diagnostic(ctx.prepared.target.text, facts.departures, counts,
                                           projected),))


FEATURE = Departures()


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
