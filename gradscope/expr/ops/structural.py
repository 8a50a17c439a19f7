"""Structural rows (not elementwise): softmax, dot, matmul, with closed-form adjoints written
with plain tensor ops (the symbolic engine's chain rule for them, never autograd)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sympy as sp
import torch

from gradscope.expr.ops.base import STRUCTURAL, Op, Tensor
from gradscope.tensors import sum_to_shape

_FN_SUM = sp.Function("sum")


def _softmax(x: Tensor, dim: int | None = None) -> Tensor:
    return torch.softmax(x, -1 if dim is None else dim)


def _softmax_vjp(g: Tensor, out: Tensor, args: Sequence[Tensor], p: dict) -> list[Tensor]:
    d = -1 if p.get("dim") is None else p["dim"]
    return [out * (g - (g * out).sum(d, keepdim=True))]


def _softmax_jvp(ts: Sequence[Tensor], out: Tensor, args: Sequence[Tensor], p: dict) -> Tensor:
    d = -1 if p.get("dim") is None else p["dim"]
    t = ts[0].expand_as(out)
    return out * (t - (t * out).sum(d, keepdim=True))


def _softmax_formula(g: Any, out: Any, args: Sequence[Any], n: int) -> list[Any]:
    return [out * (g - _FN_SUM(g * out))]


def _dot(a: Tensor, b: Tensor) -> Tensor:
    return torch.dot(a, b)


def _dot_vjp(g: Tensor, out: Tensor, args: Sequence[Tensor], p: dict) -> list[Tensor]:
    a, b = args
    return [g * b, g * a]


def _dot_jvp(ts: Sequence[Tensor], out: Tensor, args: Sequence[Tensor], p: dict) -> Tensor:
    (a, b), (ta, tb) = args, ts
    return (ta.expand_as(a) * b).sum() + (a * tb.expand_as(b)).sum()


def _matmul_vjp(g: Tensor, out: Tensor, args: Sequence[Tensor], p: dict) -> list[Tensor]:
    a, b = args
    if a.ndim == 1 and b.ndim == 1:
        return [g * b, g * a]
    a2 = a.unsqueeze(0) if a.ndim == 1 else a
    b2 = b.unsqueeze(-1) if b.ndim == 1 else b
    g2 = g.unsqueeze(-2) if a.ndim == 1 else g
    g2 = g2.unsqueeze(-1) if b.ndim == 1 else g2
    ga = g2 @ b2.transpose(-1, -2)
    gb = a2.transpose(-1, -2) @ g2
    ga = ga.squeeze(-2) if a.ndim == 1 else ga
    gb = gb.squeeze(-1) if b.ndim == 1 else gb
    return [sum_to_shape(ga, a.shape), sum_to_shape(gb, b.shape)]


def _matmul_jvp(ts: Sequence[Tensor], out: Tensor, args: Sequence[Tensor], p: dict) -> Tensor:
    (a, b), (ta, tb) = args, ts
    return ta.expand_as(a) @ b + a @ tb.expand_as(b)


def _bilinear_formula(transpose: bool) -> Callable[..., list[Any]]:
    def formula(g: Any, out: Any, args: Sequence[Any], n: int) -> list[Any]:
        a, b = args
        if not transpose:
            return [g * b, g * a]
        mm, tr = sp.Function("matmul"), sp.Function("transpose")
        return [mm(g, tr(b)), mm(tr(a), g)]
    return formula


ROWS = [
    Op("matmul", STRUCTURAL, (2, 2), torch.matmul, "a @ b (matrix product)", symbol="@",
       aliases=("matmul", "mm", "bmm", "mv"),
       vjp=_matmul_vjp, jvp=_matmul_jvp, vjp_formula=_bilinear_formula(True)),
    Op("softmax", STRUCTURAL, (1, 2), _softmax, "softmax(x[, dim]) (dim defaults to -1)",
       takes_dim=True, vjp=_softmax_vjp, jvp=_softmax_jvp, vjp_formula=_softmax_formula),
    Op("dot", STRUCTURAL, (2, 2), _dot, "dot(a, b) of two 1-D tensors",
       vjp=_dot_vjp, jvp=_dot_jvp, vjp_formula=_bilinear_formula(False)),
]

# The family `gradscope ops` lists these rows under (expr/ops/__init__.py reads it).
BY_FAMILY = {"linear algebra": ROWS}
