"""Custom Functions whose backward depends on the call: right on every call but one (or on
every second), as a stale cache or a reused workspace makes it. `counted()` makes the right
twin, which counts its calls (how many backward calls a check makes). Two shapes: elementwise
(2·sin x) and row sums (Σ_j x_ij², which finite differences evaluate column by column)."""

from __future__ import annotations

import torch


def wrong_on(call: int, how: str = "scale", every: int = 0, rows: bool = False) -> type:
    """A Function whose backward is NaN or ×1.5 on backward call `call` (1-based), or on
    every `every`-th call; 0 and 0: right on every call."""

    class CallDependent(torch.autograd.Function):
        calls = 0

        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return (x * x).sum(-1) if rows else 2 * x.sin()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            CallDependent.calls += 1
            n = CallDependent.calls
            grad = g.unsqueeze(-1) * 2 * x if rows else g * 2 * x.cos()
            if n == call or (every and n % every == 0):
                grad = grad * float("nan") if how == "nan" else grad * 1.5
            return grad

    return CallDependent


def counted(rows: bool = False) -> type:
    return wrong_on(0, rows=rows)


# (file targets for the command line and benchmarks/cuda.py: wrong on the 2nd call — the
# gradient-flow trace's — and on every second)
SecondCallWrong = wrong_on(2)
EverySecondWrong = wrong_on(0, "nan", every=2)
