"""Rows for torch ops that expressions cannot call yet but gradient-flow analysis recognises in
users' code: the saturating activations and pooling whose backward blocks part of the gradient."""

from __future__ import annotations

import torch.nn.functional as F

from gradscope.expr.ops.base import SATURATES, STRUCTURAL, Op


def _flow_only(name: str, kind: str, arity: tuple[int, int], fn, summary: str,
               grad_fns: tuple[str, ...], hint: str | None = None) -> Op:
    return Op(name, kind, arity, fn, summary, grad_fns=grad_fns, flow=SATURATES, hint=hint,
              expression=False)


ROWS = [
    _flow_only("max_pool3d", STRUCTURAL, (2, 6), F.max_pool3d, "max_pool3d(x, kernel_size)",
               ("MaxPool3DWithIndicesBackward",)),
]
