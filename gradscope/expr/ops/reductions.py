"""Reductions (an optional integer `dim` as second argument): forwards, closed-form adjoints
on plain tensors, sympy formulas for table titles, and the incremental fold of one changed
element that lets finite differences evaluate a column without recomputing the sum."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import sympy as sp
import torch

from gradscope.expr.ops.base import KINK, REDUCTION, Op, Tensor, signature
from gradscope.tensors import expand_reduced, reduced_count


def _dims(dim: Any) -> Any:
    return () if dim is None else dim


def _sum(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    return x.sum() if dim is None and not keepdim else x.sum(_all(x, dim), keepdim=keepdim)


def _mean(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    return x.mean() if dim is None and not keepdim else x.mean(_all(x, dim), keepdim=keepdim)


def _all(x: Tensor, dim: Any) -> Any:
    """torch reads dim=() as "all dims" in some reductions and as "none" in others: spell
    "all" out."""
    return tuple(range(x.ndim)) if dim is None else dim


def _prod(x: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    if dim is None:
        out = x.prod()
        return out.reshape([1] * x.ndim) if keepdim else out
    return x.prod(dim, keepdim=keepdim)


def _amax(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    # amax spreads the gradient over ties, as torch.max() without dim does.
    return x.amax() if dim is None and not keepdim else x.amax(_all(x, dim), keepdim=keepdim)


def _amin(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    return x.amin() if dim is None and not keepdim else x.amin(_all(x, dim), keepdim=keepdim)


def _norm(x: Tensor, p: float = 2.0, dim: Any = None, keepdim: bool = False) -> Tensor:
    return torch.linalg.vector_norm(x, ord=p, dim=dim, keepdim=keepdim)


def _logsumexp(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    if dim is None and not keepdim:
        return x.reshape(-1).logsumexp(0)
    return x.logsumexp(_all(x, dim), keepdim=keepdim)


def _correction(x: Tensor, dim: Any, unbiased: bool | None, correction: float | None) -> float:
    if correction is not None:
        return float(correction)
    return 0.0 if unbiased is False else 1.0


def _var(x: Tensor, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False,
         correction: float | None = None) -> Tensor:
    return torch.var(x, dim=dim, correction=_correction(x, dim, unbiased, correction),
                     keepdim=keepdim)


def _std(x: Tensor, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False,
         correction: float | None = None) -> Tensor:
    return torch.std(x, dim=dim, correction=_correction(x, dim, unbiased, correction),
                     keepdim=keepdim)


def _prod_except(x: Tensor, dim: int | None) -> Tensor:
    """Product of all other elements along dim, without dividing (exact at zeros)."""
    if dim is None:
        return _prod_except(x.reshape(-1), 0).reshape(x.shape)
    n = x.shape[dim]
    ones = torch.ones_like(x.narrow(dim, 0, 1))
    left = torch.cat([ones, x.narrow(dim, 0, n - 1)], dim).cumprod(dim)
    right = torch.cat([x.narrow(dim, 1, n - 1), ones], dim).flip(dim).cumprod(dim).flip(dim)
    return left * right


def _tie_share(x: Tensor, out: Tensor, p: dict) -> Tensor:
    mask = (x == out).to(x.dtype)
    dim = p.get("dim")
    total = mask.sum() if dim is None else mask.sum(dim, keepdim=True)
    return mask / total


def _safe_div(a: Tensor, b: Tensor) -> Tensor:
    return torch.where(b == 0, torch.zeros_like(a), a / torch.where(b == 0, 1, b))


def _norm_local(x: Tensor, out: Tensor, p: dict) -> Tensor:
    order = p.get("p", 2.0)
    if order == 2:
        return _safe_div(x, out)
    if order == 1:
        return torch.sign(x)
    if order in (math.inf, -math.inf):  # the largest (smallest) |x|, ties sharing
        return torch.sign(x) * _tie_share(x.abs(), out, p)
    if order == 0:
        return torch.zeros_like(x)
    return torch.sign(x) * _safe_div(x.abs() ** (order - 1), out ** (order - 1))


def _var_local(x: Tensor, out: Tensor, p: dict, root: bool) -> Tensor:
    dim = p.get("dim")
    n = reduced_count(x, dim)
    c = _correction(x, dim, p.get("unbiased"), p.get("correction"))
    centred = x - (x.mean() if dim is None else x.mean(dim, keepdim=True))
    local = 2 * centred / max(n - c, 0)
    return _safe_div(local, 2 * out) if root else local


# ∂r/∂x for a reduction r, given x and r broadcast back over x, and the call's parameters.
_LOCAL: dict[str, Callable[[Tensor, Tensor, dict], Tensor]] = {
    "sum": lambda x, out, p: torch.ones_like(x),
    "mean": lambda x, out, p: torch.full_like(x, 1.0 / max(reduced_count(x, p.get("dim")), 1)),
    "prod": lambda x, out, p: _prod_except(x, p.get("dim")),
    "max": _tie_share,
    "min": _tie_share,
    "norm": _norm_local,
    "logsumexp": lambda x, out, p: torch.exp(x - out),
    "var": lambda x, out, p: _var_local(x, out, p, False),
    "std": lambda x, out, p: _var_local(x, out, p, True),
}


def _reduction_vjp(local: Callable[[Tensor, Tensor, dict], Tensor]) -> Callable:
    def vjp(g: Tensor, out: Tensor, args: Sequence[Tensor], p: dict) -> list[Tensor]:
        (x,) = args
        dim, keep = p.get("dim"), p.get("keepdim", False)
        wide = expand_reduced(out, x, dim, keep)
        return [expand_reduced(g, x, dim, keep) * local(x, wide, p)]
    return vjp


def _reduction_jvp(local: Callable[[Tensor, Tensor, dict], Tensor]) -> Callable:
    def jvp(ts: Sequence[Tensor], out: Tensor, args: Sequence[Tensor], p: dict) -> Tensor:
        (x,), (t,) = args, ts
        wide = expand_reduced(out, x, p.get("dim"), p.get("keepdim", False))
        return _sum(t.expand_as(x) * local(x, wide, p), p.get("dim"), p.get("keepdim", False))
    return jvp


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


DIMS = "input, dim: dims = None, keepdim: bool = False"
VAR = ("input, dim: dims = None, unbiased: bool = None, keepdim: bool = False, "
       "correction: float = None")


def _reduction(name: str, fn: Callable[..., Tensor], summary: str,
               sig: str = DIMS, **kw: Any) -> Op:
    local = _LOCAL[name]
    formula = _formula_reduction(name) if name in _FORMULA_NAMES else None
    return Op(name, REDUCTION, (1, 1), fn, summary, takes_dim=True,
              signature=signature(sig), vjp=_reduction_vjp(local), jvp=_reduction_jvp(local),
              vjp_formula=formula, incremental=_INCREMENTAL.get(name), **kw)


def _argbranch(x: Tensor, dim: Any, largest: bool) -> Tensor:
    if isinstance(dim, tuple):  # over several dims: move them last and flatten them
        dims = sorted(d % x.ndim for d in dim)
        rest = [d for d in range(x.ndim) if d not in dims]
        x, dim = x.permute(*rest, *dims).reshape(*[x.shape[d] for d in rest], -1), -1
    flat = x.reshape(-1) if dim is None else x
    d = 0 if dim is None else dim
    return flat.argmax(d) if largest else flat.argmin(d)


def _extreme_branch(largest: bool) -> Callable[..., Tensor]:
    def branch(x: Tensor, dim: Any = None, keepdim: bool = False, p: float = 2.0) -> Tensor:
        return _argbranch(x, dim, largest)
    return branch



def _norm_branch(x: Tensor, p: float = 2.0, dim: Any = None, keepdim: bool = False) -> Tensor:
    # a kink where an element crosses 0 (p <= 1), or where the largest |x| changes (p = inf)
    if p in (math.inf, -math.inf):
        return _argbranch(x.abs(), dim, p > 0)
    return torch.sign(x) if p <= 1 else torch.zeros_like(x)


_FORMULA_NAMES = ("sum", "mean", "prod", "max", "min", "norm", "logsumexp")

ROWS = [
    _reduction("sum", _sum, "sum(x[, dim, keepdim])"),
    _reduction("mean", _mean, "mean(x[, dim, keepdim])"),
    _reduction("prod", _prod, "prod(x[, dim, keepdim]) (one dim)",
               sig="input, dim: dim = None, keepdim: bool = False"),
    # max/min fold a changed element in from the base slice's best and second best; with a
    # tensor second argument they are maximum/minimum, as in torch
    _reduction("max", _amax, "max(x[, dim, keepdim]) (the values; ties share the gradient)",
               kink=KINK, extreme=1, branch=_extreme_branch(True), aliases=("amax",),
               values_when=("dim",), otherwise="maximum"),
    _reduction("min", _amin, "min(x[, dim, keepdim]) (the values; ties share the gradient)",
               kink=KINK, extreme=-1, branch=_extreme_branch(False), aliases=("amin",),
               values_when=("dim",), otherwise="minimum"),
    _reduction("norm", _norm, "p-norm(x, p=2[, dim, keepdim]) (torch.norm)",
               sig="input, p: float = 2.0, dim: dims = None, keepdim: bool = False",
               branch=_norm_branch, kink=KINK,
               kinks_if=lambda p: p.get("p", 2.0) <= 1 or p.get("p") == math.inf),
    _reduction("logsumexp", _logsumexp, "logsumexp(x[, dim, keepdim])"),
    _reduction("var", _var, "variance var(x[, dim, unbiased, keepdim, correction=1])",
               sig=VAR),
    _reduction("std", _std, "standard deviation std(x[, dim, unbiased, keepdim, correction])",
               sig=VAR, domain=None),
]

# The family `gradscope ops` lists these rows under (expr/ops/__init__.py reads it).
BY_FAMILY = {"reduction": ROWS}
