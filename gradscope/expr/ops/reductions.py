"""Reductions (an optional integer `dim` as second argument): forwards, closed-form adjoints
on plain tensors, sympy formulas for table titles, and the incremental fold of one changed
element that lets finite differences evaluate a column without recomputing the sum."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sympy as sp
import torch

from gradscope.expr.ops.base import KINK, REDUCTION, Op, Tensor
from gradscope.tensors import expand_reduced


def _count(x: Tensor, dim: int | None) -> int:
    return x.numel() if dim is None else x.shape[dim]


def _sum(x: Tensor, dim: int | None = None) -> Tensor:
    return x.sum() if dim is None else x.sum(dim)


def _mean(x: Tensor, dim: int | None = None) -> Tensor:
    return x.mean() if dim is None else x.mean(dim)


def _prod(x: Tensor, dim: int | None = None) -> Tensor:
    return x.prod() if dim is None else x.prod(dim)


def _amax(x: Tensor, dim: int | None = None) -> Tensor:
    # amax spreads the gradient over ties, as torch.max() without dim does.
    return x.amax() if dim is None else x.amax(dim)


def _amin(x: Tensor, dim: int | None = None) -> Tensor:
    return x.amin() if dim is None else x.amin(dim)


def _norm(x: Tensor, dim: int | None = None) -> Tensor:
    return torch.linalg.vector_norm(x, dim=dim)


def _logsumexp(x: Tensor, dim: int | None = None) -> Tensor:
    return x.reshape(-1).logsumexp(0) if dim is None else x.logsumexp(dim)


def _prod_except(x: Tensor, dim: int | None) -> Tensor:
    """Product of all other elements along dim, without dividing (exact at zeros)."""
    if dim is None:
        return _prod_except(x.reshape(-1), 0).reshape(x.shape)
    n = x.shape[dim]
    ones = torch.ones_like(x.narrow(dim, 0, 1))
    left = torch.cat([ones, x.narrow(dim, 0, n - 1)], dim).cumprod(dim)
    right = torch.cat([x.narrow(dim, 1, n - 1), ones], dim).flip(dim).cumprod(dim).flip(dim)
    return left * right


def _tie_share(x: Tensor, out: Tensor, dim: int | None) -> Tensor:
    mask = (x == expand_reduced(out, x, dim)).to(x.dtype)
    total = mask.sum() if dim is None else mask.sum(dim, keepdim=True)
    return mask / total


def _safe_div(a: Tensor, b: Tensor) -> Tensor:
    return torch.where(b == 0, torch.zeros_like(a), a / torch.where(b == 0, 1, b))


def _reduction_vjp(local: Callable[[Tensor, Tensor, int | None], Tensor]) -> Callable:
    def vjp(g: Tensor, out: Tensor, args: Sequence[Tensor], dim: int | None) -> list[Tensor]:
        (x,) = args
        return [expand_reduced(g, x, dim) * local(x, out, dim)]
    return vjp


def _reduction_jvp(local: Callable[[Tensor, Tensor, int | None], Tensor]) -> Callable:
    def jvp(ts: Sequence[Tensor], out: Tensor, args: Sequence[Tensor], dim: int | None) -> Tensor:
        (x,), (t,) = args, ts
        return _sum(t.expand_as(x) * local(x, out, dim), dim)
    return jvp


_LOCAL: dict[str, Callable[[Tensor, Tensor, int | None], Tensor]] = {
    "sum": lambda x, out, dim: torch.ones_like(x),
    "mean": lambda x, out, dim: torch.full_like(x, 1.0 / _count(x, dim)),
    "prod": lambda x, out, dim: _prod_except(x, dim),
    "max": _tie_share,
    "min": _tie_share,
    "norm": lambda x, out, dim: _safe_div(x, expand_reduced(out, x, dim)),
    "logsumexp": lambda x, out, dim: torch.exp(x - expand_reduced(out, x, dim)),
}

_FN_SUM = sp.Function("sum")


def _formula_reduction(name: str) -> Callable[..., list[Any]]:
    def formula(g: Any, out: Any, args: Sequence[Any], n: int) -> list[Any]:
        (x,) = args
        local = {
            "sum": sp.S.One,
            "mean": sp.Rational(1, n) if n else sp.S.One,
            "prod": out / x,
            "max": sp.Function("max_share")(x),
            "min": sp.Function("min_share")(x),
            "norm": x / out,
            "logsumexp": sp.exp(x - out),
        }[name]
        return [g * local]
    return formula


# Reduced value r with one element changed from old to new, n elements reduced over. logsumexp
# and norm lose no accuracy this way: their absolute error stays about eps·|result|, as when
# recomputed in full.
_INCREMENTAL: dict[str, Callable[[Tensor, Tensor, Tensor, int], Tensor]] = {
    "sum": lambda r, old, new, n: r + (new - old),
    "mean": lambda r, old, new, n: r + (new - old) / max(n, 1),
    "logsumexp": lambda r, old, new, n: r + torch.log1p(torch.exp(new - r) - torch.exp(old - r)),
    "norm": lambda r, old, new, n: torch.sqrt(torch.clamp(r * r - old * old + new * new, min=0)),
}


def _reduction(name: str, fn: Callable[..., Tensor], summary: str, **kw: Any) -> Op:
    local = _LOCAL[name]
    return Op(name, REDUCTION, (1, 2), fn, summary, takes_dim=True,
              vjp=_reduction_vjp(local), jvp=_reduction_jvp(local),
              vjp_formula=_formula_reduction(name), incremental=_INCREMENTAL.get(name), **kw)


def _argbranch(x: Tensor, dim: int | None, largest: bool) -> Tensor:
    flat = x.reshape(-1) if dim is None else x
    d = 0 if dim is None else dim
    return flat.argmax(d) if largest else flat.argmin(d)



ROWS = [
    _reduction("sum", _sum, "sum(x[, dim])"),
    _reduction("mean", _mean, "mean(x[, dim])"),
    _reduction("prod", _prod, "prod(x[, dim])"),
    # max/min fold a changed element in from the base slice's best and second best
    _reduction("max", _amax, "max(x[, dim]) (ties share the gradient)", kink=KINK, extreme=1,
               branch=lambda x, dim=None: _argbranch(x, dim, True)),
    _reduction("min", _amin, "min(x[, dim]) (ties share the gradient)", kink=KINK, extreme=-1,
               branch=lambda x, dim=None: _argbranch(x, dim, False)),
    _reduction("norm", _norm, "Euclidean norm(x[, dim])"),
    _reduction("logsumexp", _logsumexp, "logsumexp(x[, dim])"),
]
