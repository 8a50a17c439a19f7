"""Torch's documented departures from the derivative: options of its own ops whose backward is
deliberately not the derivative of their forward. `nn.Embedding(padding_idx=p)` gives row p no
gradient through the lookup (the forward still reads it), and `scale_grad_by_freq` divides each
row's gradient by how often the batch looks it up: finite differences see the derivative, so a
correct model with padding tokens in its input disagrees with them on row p. The functions of
a symmetric matrix (eigvalsh, eigh, cholesky, pinv with hermitian=True) read one triangle but
return a symmetric gradient, taken over symmetric matrices: perturbing one entry of the other
triangle moves nothing.

`Undone` runs a forward with those options turned off (the forward's values are the same) and
records which of them were in effect. Where something disagreed, autograd of that forward is
the derivative autograd departs from: an element is torch's departure only where autograd
disagrees with the references and the undone gradient agrees with them — that agreement is
the excuse's proof, never an option merely present — and a projection that disagreed is one
where it agrees against the undone gradient. A forward that then fails excuses nothing. What it
excuses is torch's, never counted as the user's surrogate."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from gradscope.compare.elements import Comparison, compare
from gradscope.engines.autograd import AutogradEngine
from gradscope.errors import TargetError, UsageError
from gradscope.evidence.gather import Evidence, View
from gradscope.evidence.prepare import Prepared
from gradscope.features import projections
from gradscope.features.base import Context, Diagnosis, Feature, wrong_inputs
from gradscope.report.model import Diagnostic
from gradscope.report.status import Status
from gradscope.tensors import from_triangle

KIND = "documented_departure"


@dataclass(frozen=True)
class Departure:
    """One option in effect in one call: what it is, and what it did there."""

    option: str  # "padding_idx=0", "scale_grad_by_freq"
    op: str  # "embedding", "embedding_bag"
    effect: str  # "index 0 looked up at 3 position(s)"


def _padding(ids: torch.Tensor, weight: torch.Tensor, padding_idx: int | None
             ) -> Departure | None:
    """The padding row's departure, if the ids look it up at all (else nothing departs)."""
    if padding_idx is None:
        return None
    row = padding_idx if padding_idx >= 0 else weight.shape[0] + padding_idx
    hits = int((ids == row).sum())
    if not hits:
        return None
    return Departure(f"padding_idx={row}", "embedding",
                     f"row {row} of the weight gets no gradient through the lookup, which "
                     f"reads it at {hits} position(s)")


Reads = Callable[[Sequence[Any], Mapping[str, Any]], bool | None]


def _triangle(name: str, upper: Any) -> Reads:
    """Whether a call reads the upper triangle, from the parameter that says so (by keyword,
    or second by position)."""
    def reads_upper(args: Sequence[Any], kwargs: Mapping[str, Any]) -> bool:
        second = args[1] if len(args) > 1 and isinstance(args[1], str | bool) else None
        return kwargs.get(name, second) == upper
    return reads_upper


def _hermitian(args: Sequence[Any], kwargs: Mapping[str, Any]) -> bool | None:
    return False if kwargs.get("hermitian") else None  # the lower triangle; else no departure


# functions of a symmetric matrix: their name, and whether a call reads the upper triangle
# (None: this call reads the whole matrix)
_SYMMETRIC: dict[Callable[..., Any], tuple[str, Reads]] = {
    torch.linalg.eigvalsh: ("linalg.eigvalsh", _triangle("UPLO", "U")),
    torch.linalg.eigh: ("linalg.eigh", _triangle("UPLO", "U")),
    torch.linalg.cholesky: ("linalg.cholesky", _triangle("upper", True)),
    torch.linalg.cholesky_ex: ("linalg.cholesky_ex", _triangle("upper", True)),
    torch.cholesky: ("cholesky", _triangle("upper", True)),
    torch.linalg.pinv: ("linalg.pinv", _hermitian)}


def _symmetric(func: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any],
               found: list[Departure]) -> Any:
    """func on the matrix it reads, written from the triangle it reads: autograd then gives
    the derivative in each entry (the other triangle none) instead of torch's symmetric
    gradient."""
    label, reads_upper = _SYMMETRIC[func]
    upper = reads_upper(args, kwargs)
    if upper is None:
        return func(*args, **kwargs)
    which = "upper" if upper else "lower"
    found.append(Departure(f"the {which} triangle", label, "the input is taken as "
                           f"symmetric: its gradient is symmetric, while only the {which} "
                           "triangle is read"))
    return func(from_triangle(args[0], upper), *args[1:], **kwargs)


# (bound by name: torch passes some of these by position, some by keyword)
_SIGNATURES = {F.embedding: inspect.signature(F.embedding),
               F.embedding_bag: inspect.signature(F.embedding_bag)}


class Undone(TorchFunctionMode):
    """While active, embedding lookups run without padding_idx (embedding only: a bag leaves
    padding out of its forward too, so there the option is no departure) and without
    scale_grad_by_freq, and functions of a symmetric matrix read their triangle explicitly;
    `found` lists what was in effect."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[Departure] = []

    def __torch_function__(self, func: Callable[..., Any], types: Any,
                           args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None
                           ) -> Any:
        if func is F.embedding or func is F.embedding_bag:
            call = _SIGNATURES[func].bind(*args, **(kwargs or {}))
            given = call.arguments
            if func is F.embedding:
                found = _padding(given["input"], given["weight"], given.get("padding_idx"))
                self.found += [found] if found else []
                given["padding_idx"] = None
            if given.get("scale_grad_by_freq"):
                self.found.append(Departure(
                    "scale_grad_by_freq", func.__name__, "each looked-up row's gradient is "
                    "divided by how often the batch reads it"))
                given["scale_grad_by_freq"] = False
            return func(*call.args, **call.kwargs)
        if func in _SYMMETRIC and args and isinstance(args[0], torch.Tensor) and \
                args[0].ndim >= 2:
            return _symmetric(func, args, kwargs or {}, self.found)
        return func(*args, **(kwargs or {}))


def undone(forward: Callable[[Mapping[str, torch.Tensor]], torch.Tensor], seen: Undone
           ) -> Callable[[Mapping[str, torch.Tensor]], torch.Tensor]:
    """`forward` with torch's departures undone, recording them in `seen`."""

    def run(values: Mapping[str, torch.Tensor]) -> torch.Tensor:
        with seen:
            return forward(values)

    return run


def diagnostic(target: str, found: Sequence[Departure], counts: Mapping[str, int],
               projected: bool = False) -> Diagnostic:
    """Where autograd is torch's documented departure, and which one: `counts` elements per
    input, and (`projected`) projections that agree only with the departure undone."""
    names = sorted(n for n, c in counts.items() if c)
    total = sum(counts.values())
    options = list(dict.fromkeys(f"{d.op}({d.option}): {d.effect}" for d in found))
    where = []
    if total:
        where.append(f"at {total} element(s) of {', '.join(names)}")
    if projected:
        where.append("in the random projections")
    return Diagnostic(
        kind=KIND, op=found[0].op if found else "embedding", where=target, inputs=names,
        count=total,
        message=("autograd departs from the derivative where torch documents it does — "
                 + "; ".join(options) + " — " + " and ".join(where) + "; with the option "
                 "undone autograd agrees with the references, so this is not counted as a "
                 "mismatch"),
        hint=("this is torch's documented behaviour, not a bug in your code; to compare the "
              "derivative itself, build the layer without the option (or keep a padding index "
              "out of the inputs; give a symmetric matrix as x + x.mT)"))


@dataclass(frozen=True)
class DepartureFacts:
    """The departures in effect; per input and view, the mismatches that are one; the
    composition and the projections that agree against autograd with them undone."""

    departures: tuple[Departure, ...] = ()
    departed: dict[str, dict[str, torch.Tensor]] = field(default_factory=dict)
    composition: projections.Composition | None = None
    projections: tuple[projections.Projection, ...] = ()


class Departures(Feature["DepartureFacts"]):
    name = "departures"
    needs = (projections,)
    users = False  # (torch's departure, not the user's surrogate)

    def facts(self, ctx: Context) -> DepartureFacts | None:
        prepared, evidence = ctx.prepared, ctx.evidence
        if evidence.backward.grads is None:
            return None
        found = ctx.of(projections.FEATURE) or projections.ProjectionFacts()
        wrong = wrong_inputs(evidence)
        projected_wrong = {(p.names[0], p.index) for p in found.projections
                           if not p.kinked and not p.rejected and not p.difference <= p.slack}
        composed_wrong = found.composition is not None and found.composition.compared \
            and not found.composition.agrees
        if not (wrong or projected_wrong or composed_wrong) or not _in_effect(prepared):
            return None
        seen = Undone()
        try:
            engine = AutogradEngine(undone(prepared.target.forward, seen),
                                    prepared.bound.exact, reinstate=prepared.target.reinstate)
            if not seen.found:
                return None
            departed = _departed_views(evidence, engine, wrong)
            back = evidence.backward
            grads = engine.vjp(back.upstream.to(engine.output.dtype))
        except (TargetError, UsageError):
            return None
        corrected = replace(back, grads=grads)
        finite = evidence.finite
        again = projections.composed_over(prepared, corrected, finite, evidence.tol) \
            if composed_wrong and finite is not None else None
        agreeing = tuple(p for p in projections.projected(prepared, corrected, finite,
                                                           evidence.tol)
                         if (p.names[0], p.index) in projected_wrong
                         and p.difference <= p.slack) \
            if projected_wrong and finite is not None else ()
        return DepartureFacts(tuple(dict.fromkeys(seen.found)), departed,
                     again if again is not None and again.agrees else None, agreeing)

    def explain(self, ctx: Context, name: str, view: View, cmp: Comparison) -> Comparison:
        facts = ctx.of(self)
        mask = facts.departed.get(name, {}).get(view.label) if facts is not None else None
        return cmp if mask is None else cmp.surrogate(mask)

    def diagnose(self, ctx: Context, verdict: Any, said: Mapping[str, Diagnosis]) -> Diagnosis:
        """The `documented_departure` diagnostic: the elements where autograd is torch's own
        documented departure from the derivative (each counted once, over every view)."""
        facts = ctx.of(self)
        if facts is None:
            return Diagnosis()
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
            return Diagnosis()
        return Diagnosis((diagnostic(ctx.prepared.target.text, facts.departures, counts,
                                           projected),))


FEATURE = Departures()


def _in_effect(prepared: Prepared) -> bool:
    """Whether any of torch's departures is in effect, from a forward without a graph or a
    copy of the inputs (a model of 10⁸ parameters holds neither twice for nothing); code
    that refuses to run without gradients is asked with them, by the caller."""
    seen = Undone()
    try:
        with torch.no_grad():
            undone(prepared.target.forward, seen)(prepared.bound.exact)
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
            again = compare(grads[name], list(view.answers[name].values()), evidence.tol)
            mask = (view.raw[name].status == Status.MISMATCH.code) & (
                again.status == Status.OK.code)
            if bool(mask.any()):
                out.setdefault(name, {})[view.label] = mask
    return out
