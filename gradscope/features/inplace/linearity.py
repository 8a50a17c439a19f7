"""Whether one recorded custom Function call's backward is linear in the gradient it is given,
as every vector-Jacobian product is: backward(αv + βw) = α·backward(v) + β·backward(w). The
in-place comparison with finite differences counts a flat forward's elements as agreeing (a
surrogate's are flat too), so a constant written where a multiple of grad_output belonged —
`grad[x > 1] = 1` under a saturated clamp — is only seen here. Run on the call's own arguments
through autograd (its forward once, its backward four times); a backward that differs between
two identical calls (random) is no evidence and is left alone."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from gradscope.compare.tolerance import Tolerance
from gradscope.evidence.custom_backward import ALPHA, BETA
from gradscope.features.inplace.calls import applied
from gradscope.rng import generator

HOW = ("not linear in grad_output at {count} element(s): backward(αv + βw) ≠ α·backward(v) + "
       "β·backward(w), so a constant (or a function of the input alone) was written where a "
       "multiple of grad_output belonged")


@dataclass(frozen=True)
class Nonlinear:
    argument: str
    count: int


def nonlinear(cls: Any, args: tuple[Any, ...], kwargs: dict[str, Any], names: list[str],
              flat: Callable[[Any], torch.Tensor], tol: Tolerance, seed: int
              ) -> Nonlinear | None:
    """The first argument whose gradient from `cls` is not linear in the upstream, or None
    (linear, random, or not checkable on these arguments)."""
    leaves = [a.detach().double().requires_grad_(True)
              if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
    wanted = [k for k, a in enumerate(leaves) if isinstance(a, torch.Tensor) and a.requires_grad]
    if not wanted:
        return None
    try:
        with torch.enable_grad():
            out = flat(applied(cls, leaves, kwargs))
        if not out.requires_grad or out.numel() == 0:
            return None
        # (drawn on the CPU's generator, then where the output is: a CUDA output given CPU
        # upstreams raised, and the check was silently skipped)
        v = torch.randn(out.shape, generator=generator(seed, ":inplace-v"),
                        dtype=out.dtype).to(out.device)
        w = torch.randn(out.shape, generator=generator(seed, ":inplace-w"),
                        dtype=out.dtype).to(out.device)
        inputs = [leaves[k] for k in wanted]

        def vjp(u: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
            return torch.autograd.grad(out, inputs, u, retain_graph=True, allow_unused=True)

        gv, again, gw, both = vjp(v), vjp(v), vjp(w), vjp(ALPHA * v + BETA * w)
    except Exception:  # the Function refuses float64 arguments or a second backward
        return None
    for k, a, b, c, d in zip(wanted, gv, again, gw, both, strict=True):
        if a is None or b is None or c is None or d is None:
            continue
        if not torch.allclose(a, b, rtol=tol.rtol, atol=tol.atol, equal_nan=True):
            return None  # random: two identical calls differ
        expected = ALPHA * a + BETA * c
        off = (d - expected).abs() > tol.atol + 10 * tol.rtol * expected.abs()
        if bool(off.any()):
            return Nonlinear(names[k], int(off.sum()))
    return None
