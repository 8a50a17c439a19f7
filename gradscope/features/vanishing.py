"""Vanishing ops: an op on the path to the output whose gradient is zero (round, floor, a
saturated clamp). The gradient-flow trace finds them; each input below one is probed with wide
shifts (diagnose/vanishing.py) to confirm the function really depends on it there — the flow
feature reports those that starve a real dependence. Only below a known piecewise-constant op
(the op table's catalogue) are the `ok` zeros relabelled `vanishing`: a zero from an unknown op
can be the true derivative (tanh saturated to 1.0), and the relabel never excuses a mismatch."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gradscope.diagnose import flow, vanishing
from gradscope.evidence.gather import View
from gradscope.features.base import Context, Feature, Said
from gradscope.verdict.compare import Comparison


@dataclass(frozen=True)
class VanishingFacts:
    # inputs below a vanishing point where the function is not constant (all such points,
    # for the flow findings), and those below a known piecewise-constant op
    confirmed: frozenset[str] = frozenset()
    vanishing: frozenset[str] = frozenset()
    # inputs whose probes the target refused (how): gradscope's own tries, never its failure
    refused: dict[str, str] = field(default_factory=dict)


class Vanishing(Feature):
    name = "vanishing"

    def facts(self, ctx: Context) -> VanishingFacts | None:
        traced = ctx.evidence.backward.flow
        if traced is None or ctx.evidence.backward.grads is None:
            return None
        finite = ctx.evidence.finite
        values = finite.fd.values if finite is not None and finite.fd is not None \
            else ctx.prepared.bound.exact
        confirmed = vanishing.confirm(ctx.prepared.target.forward, values,
                                      flow.vanishing_inputs(traced),
                                      ctx.evidence.backward.upstream)
        below = frozenset(flow.vanishing_inputs(traced, catalogue_only=True))
        return VanishingFacts(confirmed.names, confirmed.names & below, confirmed.refused)

    def relabel(self, ctx: Context, name: str, view: View, cmp: Comparison) -> Comparison:
        facts = ctx.of(self.name)
        if facts is None or name not in facts.vanishing or view.jacobian:
            return cmp  # (zero Jacobian entries are ordinary)
        return cmp.vanishing(view.autograd[name])

    def diagnose(self, ctx: Context, verdict: Any, said: Mapping[str, Said]) -> Said:
        facts = ctx.of(self.name)
        if facts is None:
            return Said()
        return Said(notes=tuple(
            f"{name}: the target refused the wide shifts gradscope tries to see whether a zero "
            f"gradient hides a function that moves ({why}); not probed"
            for name, why in facts.refused.items()))


FEATURE = Vanishing()
