"""Vanishing ops: an op on the path to the output whose gradient is zero (round, floor, a
saturated clamp). The gradient-flow trace finds them; each input below one is probed with
shifts far beyond any finite-difference stencil (`confirm`) to see whether the function still
moves there — the flow feature reports those that starve a real dependence. Only below a known
piecewise-constant op (the op table's catalogue) are the `ok` zeros relabelled `vanishing`: a
zero from an unknown op can be the true derivative (tanh saturated to 1.0), and the relabel
never excuses a mismatch."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from gradscope.compare.elements import Comparison
from gradscope.evidence import flow
from gradscope.evidence.gather import View
from gradscope.features.base import Context, Diagnosis, Feature
from gradscope.usercode import refusal

WIDE_STEP = 0.37  # "the user's sense" of not constant: a shift far beyond any FD stencil
# where the target refuses a shift (its domain ends: an ODE solver's step underflows), a
# shorter one is tried — still far beyond any stencil
STEPS = (WIDE_STEP, WIDE_STEP / 4)
PROBE_SECONDS, PROBE_TIMES = 1.0, 20  # a shift may take 1 s, or 20 evaluations at the values


@dataclass(frozen=True)
class Confirmed:
    """The inputs confirmed, and those whose every shift the target refused (with the first
    refusal's words): not probed, never a failure of the check."""

    names: frozenset[str]
    refused: dict[str, str]


def confirm(forward: Callable[[Mapping[str, torch.Tensor]], torch.Tensor],
            values: Mapping[str, torch.Tensor], candidates: set[str],
            upstream: torch.Tensor) -> Confirmed:
    """Inputs below a vanishing point for which a wide shift (±0.37·max(1,|x|)) still changes
    vᵀf, the quantity whose gradient is asked for: the function is not constant in them, so
    the zero gradient is an artefact of the op (round, floor, ...). `0*x` is constant at every
    scale, and `sum(softmax(x))` is constant for a ones upstream: neither is flagged. A probe
    is gradscope's own business: one the target refuses tells nothing, and is skipped."""
    confirmed: set[str] = set()
    refused: dict[str, str] = {}
    candidates &= set(values)
    if not candidates:
        return Confirmed(frozenset(), {})
    v = upstream.detach().to(next(iter(values.values())).dtype)

    def phi(point: Mapping[str, torch.Tensor]) -> float:
        return float((forward(point).detach() * v).sum())

    tic = time.perf_counter()
    base = phi(values)
    # a wide shift can cost far more than an evaluation at the values (an adaptive ODE solver
    # integrating over a much longer span): the probe is an explanation, never worth more
    allowed = max(PROBE_SECONDS, PROBE_TIMES * (time.perf_counter() - tic))
    for name in sorted(candidates):
        x = values[name]
        answered = 0
        for size, sign in ((s, d) for s in STEPS for d in (1.0, -1.0)):
            tic = time.perf_counter()
            try:
                moved = phi({**values, name: x + sign * size * x.abs().clamp(min=1.0)})
            except Exception as exc:  # outside what the target accepts: this shift tells nothing
                refused.setdefault(name, refusal(exc))
                continue
            took = time.perf_counter() - tic
            if took > allowed:
                refused[name] = (f"one shift took {took:.1f} s, far longer than an evaluation "
                                 "at the values")
                return Confirmed(frozenset(confirmed), refused)
            answered += 1
            if abs(moved - base) > 1e-6 * (1.0 + abs(base)):
                confirmed.add(name)
                break
            if answered == 2:  # both directions answered at the widest accepted size
                break
        if answered:
            refused.pop(name, None)
    return Confirmed(frozenset(confirmed), refused)


@dataclass(frozen=True)
class VanishingFacts:
    # inputs below a vanishing point where the function is not constant (all such points,
    # for the flow findings), and those below a known piecewise-constant op
    confirmed: frozenset[str] = frozenset()
    vanishing: frozenset[str] = frozenset()
    # inputs whose probes the target refused (how): gradscope's own tries, never its failure
    refused: dict[str, str] = field(default_factory=dict)


class Vanishing(Feature["VanishingFacts"]):
    name = "vanishing"

    def facts(self, ctx: Context) -> VanishingFacts | None:
        traced = ctx.evidence.backward.flow
        if traced is None or ctx.evidence.backward.grads is None:
            return None
        finite = ctx.evidence.finite
        values = finite.fd.values if finite is not None and finite.fd is not None \
            else ctx.prepared.bound.exact
        grads = ctx.evidence.backward.grads
        # (an input with no zero in its gradient has nothing a vanishing op starved)
        zeros = {n for n in flow.vanishing_inputs(traced)
                 if n not in grads or not bool(grads[n].all())}
        confirmed = confirm(ctx.prepared.target.forward, values, zeros,
                            ctx.evidence.backward.upstream)
        below = frozenset(flow.vanishing_inputs(traced, catalogue_only=True))
        return VanishingFacts(confirmed.names, confirmed.names & below, confirmed.refused)

    def relabel(self, ctx: Context, name: str, view: View, cmp: Comparison) -> Comparison:
        facts = ctx.of(self)
        if facts is None or name not in facts.vanishing or view.jacobian:
            return cmp  # (zero Jacobian entries are ordinary)
        return cmp.vanishing(view.autograd[name])

    def diagnose(self, ctx: Context, verdict: Any, said: Mapping[str, Diagnosis]) -> Diagnosis:
        facts = ctx.of(self)
        if facts is None:
            return Diagnosis()
        return Diagnosis(notes=tuple(
            f"{name}: the target refused the wide shifts gradscope tries to see whether a zero "
            f"gradient hides a function that moves ({why}); not probed"
            for name, why in facts.refused.items()))


FEATURE = Vanishing()
