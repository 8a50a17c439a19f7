"""Rows for torch ops that expressions cannot call but gradient-flow analysis recognises in
users' code: the saturating poolings whose backward blocks part of the gradient (fractional max
pooling draws its windows at random, so an expression refuses it)."""

from __future__ import annotations

import torch.nn.functional as F

from gradscope.expr.ops.base import SATURATES, STRUCTURAL, Op


def _flow_only(name: str, kind: str, arity: tuple[int, int], fn, summary: str,
               grad_fns: tuple[str, ...], hint: str | None = None) -> Op:
    return Op(name, kind, arity, fn, summary, grad_fns=grad_fns, flow=SATURATES, hint=hint,
              expression=False)


def _fractional3d(x, kernel_size, output_ratio=0.5):
    return F.fractional_max_pool3d(x, kernel_size, output_ratio=output_ratio)


ROWS = [
    _flow_only("fractional_max_pool3d", STRUCTURAL, (2, 3), _fractional3d,
               "fractional_max_pool3d(x, kernel_size, output_ratio)",
               ("FractionalMaxPool3DBackward",)),
]
