"""Whether a zero gradient below a vanishing op is an artefact: the function still moves when
the input is shifted far beyond any finite-difference stencil."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch

from gradscope.usercode import refusal

WIDE_STEP = 0.37  # "the user's sense" of not constant: a shift far beyond any FD stencil
# where the target refuses a shift (its domain ends: an ODE solver's step underflows), a
# shorter one is tried — still far beyond any stencil
STEPS = (WIDE_STEP, WIDE_STEP / 4)


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

    base = phi(values)
    for name in sorted(candidates):
        x = values[name]
        answered = 0
        for size, sign in ((s, d) for s in STEPS for d in (1.0, -1.0)):
            try:
                moved = phi({**values, name: x + sign * size * x.abs().clamp(min=1.0)})
            except Exception as exc:  # outside what the target accepts: this shift tells nothing
                refused.setdefault(name, refusal(exc))
                continue
            answered += 1
            if abs(moved - base) > 1e-6 * (1.0 + abs(base)):
                confirmed.add(name)
                break
            if answered == 2:  # both directions answered at the widest accepted size
                break
        if answered:
            refused.pop(name, None)
    return Confirmed(frozenset(confirmed), refused)

