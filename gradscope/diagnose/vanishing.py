"""Whether a zero gradient below a vanishing op is an artefact: the function still moves when
the input is shifted far beyond any finite-difference stencil."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch

WIDE_STEP = 0.37  # "the user's sense" of not constant: a shift far beyond any FD stencil


def confirm(forward: Callable[[Mapping[str, torch.Tensor]], torch.Tensor],
            values: Mapping[str, torch.Tensor], candidates: set[str],
            upstream: torch.Tensor) -> set[str]:
    """Inputs below a vanishing point for which a wide shift (±0.37·max(1,|x|)) still changes
    vᵀf, the quantity whose gradient is asked for: the function is not constant in them, so
    the zero gradient is an artefact of the op (round, floor, ...). `0*x` is constant at every
    scale, and `sum(softmax(x))` is constant for a ones upstream: neither is flagged."""
    confirmed: set[str] = set()
    candidates &= set(values)
    if not candidates:
        return confirmed
    v = upstream.detach().to(next(iter(values.values())).dtype)

    def phi(point: Mapping[str, torch.Tensor]) -> float:
        return float((forward(point).detach() * v).sum())

    base = phi(values)
    for name in candidates:
        x = values[name]
        step = WIDE_STEP * x.abs().clamp(min=1.0)
        for sign in (1.0, -1.0):
            moved = phi({**values, name: x + sign * step})
            if abs(moved - base) > 1e-6 * (1.0 + abs(base)):
                confirmed.add(name)
                break
    return confirmed
