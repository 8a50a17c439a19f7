"""The diagnoses stage: what the verdict means, as diagnostics — the custom-backward checks that
failed, the kinks and jumps finite differences crossed, what the gradient-flow trace shows
(vanishing points and the tensors they starve, saturation, dead units, NaN origins), how each
mismatch relates to the derivative (a factor, a transpose, a missing term), what each surrogate
looks like, and, for a model, the layers that barely learn."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from gradscope.diagnose import (
    culprits,
    departures,
    findings,
    kinks,
    partitions,
    relations,
    surrogates,
)
from gradscope.diagnose.layers import LayerStats, quiet_layers
from gradscope.report.build import mask_indices
from gradscope.report.model import Diagnostic
from gradscope.report.modules import is_model
from gradscope.report.status import Status
from gradscope.runner.evidence import Evidence
from gradscope.runner.excuses import Excuses
from gradscope.runner.judgement import Verdict
from gradscope.runner.prepare import Prepared


@dataclass(frozen=True)
class Diagnoses:
    diagnostics: tuple[Diagnostic, ...] = ()
    relations: dict[str, relations.Relation] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


def diagnose(prepared: Prepared, evidence: Evidence, excuses: Excuses,
             verdict: Verdict) -> Diagnoses:
    back = evidence.backward
    if back.grads is None:
        names = list(prepared.target.names)
        failure = back.failure
        assert failure is not None
        return Diagnoses((replace(failure, inputs=names, count=sum(
            prepared.bound.cast[n].numel() for n in names)),))
    found = [*excuses.findings, *_kinks(prepared, evidence), *_flow(prepared, evidence,
                                                                     excuses)]
    undefined = {n: c.status == Status.UNDEFINED.code for n, c in verdict.table.items()
                 if not verdict.seen.get(n) or not verdict.seen[n].jacobian}
    if not any(d.kind == "nan" for d in found):
        nan = kinks.nan_diagnostic(prepared.target.text, undefined)
        found += [nan] if nan else []
    found = _undefined_where(prepared, found, undefined)
    explained = _relations(prepared, evidence, excuses, verdict)
    found += [_pattern(prepared, verdict, name, rel) for name, rel in explained.items()
              if name not in excuses.declared]
    found += _culprits(prepared, evidence, verdict, explained)
    surrogate, notes = _surrogates(prepared, evidence, excuses, verdict, explained)
    found += surrogate + _departures(prepared, excuses)
    if is_model(prepared.target.roles()):
        found += quiet_layers(_layer_stats(prepared, back.grads))
    return Diagnoses(tuple(found), explained, tuple(notes))


def _kinks(prepared: Prepared, evidence: Evidence) -> list[Diagnostic]:
    finite = evidence.finite
    if finite is None:
        return []
    return kinks.from_estimates(prepared.target.branch_sites, finite.estimates)


def _flow(prepared: Prepared, evidence: Evidence, excuses: Excuses) -> list[Diagnostic]:
    traced = evidence.backward.flow
    if traced is None:
        return []
    return [*findings.diagnostics(traced, prepared.bound.cast, set(excuses.confirmed),
                                  evidence.backward.grads),
            *findings.one_sided(traced, list(prepared.target.names),
                                prepared.bound.chosen)]


def _relations(prepared: Prepared, evidence: Evidence, excuses: Excuses, verdict: Verdict
               ) -> dict[str, relations.Relation]:
    """How each input that mismatched relates to its reference, where a simple relation
    holds (read from the first comparison that showed the mismatch)."""
    first: dict[str, relations.Arrays] = {}
    for seen in verdict.seen.values():
        if seen.reference is not None:
            first[seen.name] = relations.Arrays(seen.autograd, seen.reference, seen.error,
                                                seen.comparison.status)
    output = evidence.backward.engine.output
    sizes = relations.sizes_of(tuple(output.shape), {n: tuple(prepared.bound.cast[n].shape)
                                                     for n in prepared.target.names})
    found = {}
    numbers = prepared.target.numbers()
    for name, arrays in first.items():
        rel = _inconsistent(excuses, name) if name not in excuses.declared else None
        if rel is None:
            variables = None if verdict.seen[name].jacobian else _variables(prepared, name)
            rel = relations.find(name, arrays, evidence.tol, sizes, first,
                                 excuses.ignored.get(name), variables, numbers)
        if rel is not None:
            found[name] = rel
    return found


def _variables(prepared: Prepared, name: str) -> dict[str, torch.Tensor]:
    """The values a partition of `name`'s elements may be drawn on: `name` itself, then the
    other inputs shaped like it (a mask, a threshold given per element)."""
    cast, roles = prepared.bound.cast, prepared.target.roles()
    shape = tuple(cast[name].shape)
    return {name: cast[name], **{n: cast[n] for n in prepared.target.names
                                 if n != name and tuple(cast[n].shape) == shape
                                 and roles.get(n, "input") == "input"}}


def _inconsistent(excuses: Excuses, name: str) -> relations.Relation | None:
    """How the surrogate of `name` fails the coarse-scale check, if it does."""
    coarse, bad = excuses.coarse.get(name), excuses.inconsistent.get(name)
    if coarse is None or bad is None:
        return None
    return surrogates.inconsistency(coarse, _lines(coarse, bad))


def _lines(coarse: Any, mask: torch.Tensor) -> torch.Tensor:
    """The coarse lines' verdicts, CONSISTENT for the lines of elements outside `mask`."""
    on = mask.reshape(-1).cpu()[coarse.elements]
    return torch.where(on, coarse.reading.verdict, torch.zeros_like(coarse.reading.verdict))


def _undefined_where(prepared: Prepared, found: list[Diagnostic],
                     undefined: Mapping[str, torch.Tensor]) -> list[Diagnostic]:
    """NaN diagnostics say by value where the gradient is undefined ('exactly where x == 0'),
    when a predicate on the inputs separates those elements from the others."""
    said = []
    for name, mask in undefined.items():
        if mask.shape != prepared.bound.cast[name].shape or not bool(mask.any()):
            continue
        part = partitions.find(mask, torch.ones_like(mask), _variables(prepared, name))
        if part is not None:
            said.append((name, f"exactly where {part.said}"))
    if not said:
        return found
    where = said[0][1] if len(said) == 1 else "; ".join(f"{n}: {w}" for n, w in said)
    return [replace(d, message=f"{d.message} ({where})", summary=where)
            if d.kind == "nan" else d for d in found]


def _culprits(prepared: Prepared, evidence: Evidence, verdict: Verdict,
              explained: Mapping[str, relations.Relation]) -> list[Diagnostic]:
    """The custom Functions the evidence checked in place (runner/inplace.py), the wrong ones
    named; a target that is one Function is its own culprit where an input mismatched, with
    the relation its table found."""
    if evidence.in_place:  # (checked in place already, whatever the tensors' statuses)
        return culprits.diagnostics(evidence.in_place)
    own = prepared.target.own_function
    if own is None or Status.MISMATCH not in verdict.statuses.values():
        return []  # (no custom Function ran where it could be checked in place)
    wrong = [n for n, s in verdict.statuses.items() if s == Status.MISMATCH]
    first = wrong[0]
    count = verdict.table[first].counts().get(Status.MISMATCH, 0)
    return [culprits.named(own, first, explained.get(first), count)]


def _pattern(prepared: Prepared, verdict: Verdict, name: str,
             rel: relations.Relation) -> Diagnostic:
    """A `mismatch_pattern` diagnostic: the relation a mismatch follows, and what to do."""
    seen = verdict.seen[name]
    wrong = seen.comparison.status == Status.MISMATCH.code
    return Diagnostic(
        kind="mismatch_pattern", op=rel.kind, where=prepared.target.text, inputs=[name],
        count=rel.covers, message=f"{name}: {rel.message}", hint=relations.HINTS[rel.kind],
        relation=rel.kind, factor=rel.factor, summary=rel.text,
        indices=None if seen.jacobian else {name: mask_indices(wrong)})


def _surrogates(prepared: Prepared, evidence: Evidence, excuses: Excuses, verdict: Verdict,
                explained: Mapping[str, relations.Relation]) -> tuple[list[Diagnostic],
                                                                       list[str]]:
    """The `surrogate_gradient` diagnostic (what each surrogate looks like, or the relation a
    declared one follows), and a note for a declaration that was not needed."""
    # every element judged surrogate in any comparison (the random upstreams and the Jacobian
    # can show one the ones upstream hides, as a hard Gumbel-softmax's)
    counts = {n: int(m.sum()) for n, m in verdict.surrogate_elements.items()}
    grads = evidence.backward.grads
    assert grads is not None
    shapes = {}
    for name, count in counts.items():
        if count and name not in excuses.declared and name in verdict.table:
            mask = verdict.table[name].status == Status.SURROGATE.code
            coarse = excuses.coarse.get(name)
            lines = _surrogate_lines(coarse, verdict.surrogate_elements[name])
            gate = surrogates.gate(coarse, int(torch.nonzero(lines)[0])) \
                if coarse is not None and bool(lines.any()) else None
            shapes[name] = surrogates.shape_of(grads[name], prepared.bound.cast[name], mask,
                                               excuses.flat.get(name), gate)
            if coarse is not None:
                said = surrogates.consistency(coarse, lines)
                shapes[name] += f"; {said}" if said else ""
    reasons = {n: r.message for n, r in explained.items()}
    found = []
    if any(counts.values()):
        found.append(surrogates.diagnostic(prepared.target.text, counts, shapes,
                                           excuses.declared, reasons))
    notes = [f"{name} was declared a surrogate ({why}), but its gradient agrees with the "
             "derivative: the declaration is not needed"
             for name, why in excuses.declared.items() if not counts.get(name)]
    if excuses.unswept:
        notes.append(f"the surrogates of {', '.join(excuses.unswept)} were not checked at a "
                     f"coarse scale (the {len(excuses.coarse)} inputs with the most surrogate "
                     "elements were): check them on their own with --only NAME")
    notes += [f"{name}: the target refused the wide shifts gradscope tries to see whether a zero "
              f"gradient hides a function that moves ({why}); not probed"
              for name, why in excuses.refused.items()]
    return found, notes


def _departures(prepared: Prepared, excuses: Excuses) -> list[Diagnostic]:
    """The `documented_departure` diagnostic: the elements where autograd is torch's own
    documented departure from the derivative (each counted once, over every view)."""
    counts = {}
    for name, views in excuses.departed.items():
        shape = prepared.bound.cast[name].shape
        union = torch.zeros(shape, dtype=torch.bool)
        for mask in views.values():
            # (a Jacobian's mask is (outputs, elements): an element departs in any row)
            union |= (mask.any(0) if mask.numel() != union.numel() else mask
                      ).reshape(shape).cpu()
        counts[name] = int(union.sum())
    projected = excuses.composition is not None or bool(excuses.projections)
    if not any(counts.values()) and not projected:
        return []
    return [departures.diagnostic(prepared.target.text, excuses.departures, counts, projected)]


def _surrogate_lines(coarse: Any, elements: torch.Tensor) -> torch.Tensor:
    """Which of the coarse lines run through surrogate elements (bool per line)."""
    if coarse is None:
        return torch.zeros(0, dtype=torch.bool)
    return elements.reshape(-1).cpu()[coarse.elements]


def _layer_stats(prepared: Prepared, grads: Mapping[str, torch.Tensor]) -> list[LayerStats]:
    roles = prepared.target.roles()
    out = []
    for name in prepared.target.names:
        g = grads[name].detach().to(torch.float64)
        norm = float(torch.linalg.vector_norm(g)) if g.numel() else 0.0
        out.append(LayerStats(name, roles.get(name, "input"), tuple(g.shape), g.numel(), norm))
    return out


__all__ = ["Diagnoses", "diagnose"]
