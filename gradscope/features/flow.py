"""Where the gradient goes: what the gradient-flow trace shows (explain/findings.py) —
vanishing points and the tensors they starve, saturation, dead units, NaN origins, branch
sites seen on one side only — and, where autograd is undefined (NaN) at elements, by value where
(`exactly where x == 0`) when a predicate on the inputs separates them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import torch

from gradscope.explain import findings, partitions
from gradscope.features import kinks, vanishing
from gradscope.features.base import Context, Diagnosis, Feature
from gradscope.report.model import Diagnostic
from gradscope.report.status import Status


class GradientFlow(Feature[None]):
    name = "flow"
    reads = (vanishing,)

    def diagnose(self, ctx: Context, verdict: Any, said: Mapping[str, Diagnosis]) -> Diagnosis:
        if ctx.evidence.backward.grads is None:
            return Diagnosis()
        found = _traced(ctx)
        undefined = {n: c.status == Status.UNDEFINED.code for n, c in verdict.table.items()
                     if c.has(Status.UNDEFINED)  # (no mask of a million elements for none)
                     and (not verdict.seen.get(n) or not verdict.seen[n].jacobian)}
        if not any(d.kind == "nan" for d in found):
            nan = kinks.nan_diagnostic(ctx.prepared.target.text, undefined)
            found += [nan] if nan else []
        return Diagnosis(tuple(_undefined_where(ctx, found, undefined)))


FEATURE = GradientFlow()


def _traced(ctx: Context) -> list[Diagnostic]:
    traced, prepared = ctx.evidence.backward.flow, ctx.prepared
    if traced is None:
        return []
    below = ctx.of(vanishing.FEATURE)
    return [*findings.diagnostics(traced, prepared.bound.cast,
                                  set(below.confirmed) if below is not None else set(),
                                  ctx.evidence.backward.grads),
            *findings.one_sided(traced, list(prepared.target.names), prepared.bound.chosen)]


def variables(ctx: Context, name: str) -> dict[str, torch.Tensor]:
    """The values a partition of `name`'s elements may be drawn on: `name` itself, then the
    other inputs shaped like it (a mask, a threshold given per element)."""
    prepared = ctx.prepared
    cast, roles = prepared.bound.cast, prepared.target.roles()
    shape = tuple(cast[name].shape)
    return {name: cast[name], **{n: cast[n] for n in prepared.target.names
                                 if n != name and tuple(cast[n].shape) == shape
                                 and roles.get(n, "input") == "input"}}


def _undefined_where(ctx: Context, found: list[Diagnostic],
                     undefined: Mapping[str, torch.Tensor]) -> list[Diagnostic]:
    """NaN diagnostics say by value where the gradient is undefined ('exactly where x == 0'),
    when a predicate on the inputs separates those elements from the others."""
    said = []
    for name, mask in undefined.items():
        if mask.shape != ctx.prepared.bound.cast[name].shape or not bool(mask.any()):
            continue
        part = partitions.find(mask, torch.ones_like(mask), variables(ctx, name))
        if part is not None:
            said.append((name, f"exactly where {part.said}"))
    if not said:
        return found
    where = said[0][1] if len(said) == 1 else "; ".join(f"{n}: {w}" for n, w in said)
    return [replace(d, message=f"{d.message} ({where})", summary=where)
            if d.kind == "nan" else d for d in found]
