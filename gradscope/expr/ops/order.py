"""Rows that pick elements by their values: sort, msort, topk, kthvalue, median, nanmedian,
mode, cummax, cummin, and quantile (written with sort). Each output element is one input
element, chosen by comparing values; the adjoint sends each upstream value back to the element
chosen (a scatter-add at the indices of torch's forward), the tangent is gathered from there.
Where two elements tie or swap places the choice changes: a kink, read from those indices."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from gradscope.expr import ir
from gradscope.expr.ops.base import KINK, Build, Op, Tensor, structural

Located = tuple[Tensor, Tensor, int]  # the input as searched, the indices chosen, the dim
Locate = Callable[[Tensor, dict], Located]
VALUES = ("values", "indices")


def _sorted(x: Tensor, p: dict) -> Located:
    d = p.get("dim", -1)
    return x, torch.sort(x, dim=d, descending=p.get("descending", False),
                         stable=p.get("stable", False)).indices, d


def _along(fn: Callable[..., Any], *names: str) -> Locate:
    """The indices of torch's (values, indices) along `dim` with the dim kept; over the
    flattened input where there is no dim (median(x))."""
    def locate(x: Tensor, p: dict) -> Located:
        static = [p[n] for n in names]
        d = p.get("dim", -1)
        if d is None:
            x, d = x.reshape(-1), 0
        return x, fn(x, *static, dim=d, keepdim=True).indices, d
    return locate


def _topk(x: Tensor, p: dict) -> Located:
    d = p.get("dim", -1)
    return x, torch.topk(x, p["k"], dim=d, largest=p.get("largest", True),
                         sorted=p.get("sorted", True)).indices, d


def _cumulative(fn: Callable[..., Any]) -> Locate:
    def locate(x: Tensor, p: dict) -> Located:
        return x, fn(x, p["dim"]).indices, p["dim"]
    return locate


def _flat(located: Located) -> tuple[Tensor, Tensor, int]:
    """0-d inputs searched as one element (torch treats them as length 1 along dim 0)."""
    x, idx, d = located
    if x.ndim == 0:
        return x.reshape(1), idx.reshape(-1), 0
    return x, idx, d


def _vjp(locate: Locate) -> Callable[..., list[Tensor]]:
    def vjp(g: Tensor, out: Tensor, args: Sequence[Tensor], p: dict) -> list[Tensor]:
        x = args[0]
        searched, idx, d = _flat(locate(x, p))
        back = torch.zeros_like(searched).scatter_add(d, idx, g.expand(out.shape)
                                                      .reshape(idx.shape))
        return [back.reshape(x.shape)]
    return vjp


def _jvp(locate: Locate) -> Callable[..., Tensor]:
    def jvp(ts: Sequence[Tensor], out: Tensor, args: Sequence[Tensor], p: dict) -> Tensor:
        x = args[0]
        searched, idx, d = _flat(locate(x, p))
        return ts[0].expand_as(x).reshape(searched.shape).gather(d, idx).reshape(out.shape)
    return jvp


def _branch(fn: Callable[..., Tensor], locate: Locate) -> Callable[..., Tensor]:
    def branch(x: Tensor, **p: Any) -> Tensor:  # a tie or a swap changes the indices: a kink
        return _flat(locate(x, p))[1].reshape(fn(x, **p).shape)
    return branch


def _values(fn: Callable[..., Any]) -> Callable[..., Tensor]:
    """Torch's function answering with its values (the part an expression can pick)."""
    def run(x: Tensor, _item: int = 0, **p: Any) -> Tensor:
        return fn(x, **p).values
    return run


def _row(name: str, fn: Callable[..., Tensor], summary: str, sig: str, locate: Locate,
         **kw: Any) -> Op:
    return structural(name, fn, summary, sig, vjp=_vjp(locate), jvp=_jvp(locate),
                      branch=_branch(fn, locate), kink=KINK, **kw)


def _median(fn: Callable[..., Any]) -> Callable[..., Tensor]:
    def run(x: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
        return fn(x) if dim is None else fn(x, dim, keepdim).values
    return run


def _msort(x: Tensor) -> Tensor:
    return torch.sort(x, dim=0).values


def _quantile(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
              names: Sequence[str] = ()) -> ir.Node:
    """The q-th quantile: the sorted values at the two ranks around q·(n-1), mixed as
    `interpolation` says."""
    (x,), meta, d = args, metas[0], p.get("dim")
    if meta.ndim == 0:  # one element: every quantile is that element
        return b("pos", x)
    if d is None:
        x, meta, d = b("reshape", x, shape=(-1,)), meta.reshape(-1), 0
    n, q = meta.shape[d], p["q"]
    ranked = b("sort", x, dim=d, _item=0)
    rank = q * (n - 1)
    lo, hi = math.floor(rank), math.ceil(rank)
    how = p.get("interpolation", "linear")
    if how == "nearest":  # round half to even, as torch
        lo = hi = round(rank)
    pick = {"lower": (lo, lo), "higher": (hi, hi), "nearest": (lo, lo)}.get(how, (lo, hi))
    low = b("narrow", ranked, dim=d, start=pick[0], length=1)
    high = b("narrow", ranked, dim=d, start=pick[1], length=1)
    weight = {"midpoint": 0.5}.get(how, rank - lo if how == "linear" else 0.0)
    mixed = b("add", b("mul", 1 - weight, low), b("mul", weight, high))
    return mixed if p.get("keepdim") else b("squeeze", mixed, dim=d)


def _quantile_fn(fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
    def run(x: Tensor, q: float, dim: int | None = None, keepdim: bool = False,
            interpolation: str = "linear") -> Tensor:
        return fn(x, q, dim=dim, keepdim=keepdim, interpolation=interpolation)
    return run


SORT = "input, dim: dim = -1, descending: bool = False, stable: bool = False"
ALONG = "input, dim: dim = -1, keepdim: bool = False"
MEDIAN = "input, dim: dim = None, keepdim: bool = False"
QUANTILE = ("input, q: float, dim: dim = None, keepdim: bool = False, "
            "interpolation: str = 'linear'")
HOW = {"interpolation": ("linear", "lower", "higher", "nearest", "midpoint")}

ROWS = [
    _row("sort", _values(torch.sort), "sort(x, dim=-1, descending=False).values", SORT,
         _sorted, returns=VALUES, data_fields=("indices",)),
    _row("msort", _msort, "msort(x): sorted along dim 0", "input",
         lambda x, p: _sorted(x, {"dim": 0})),
    _row("topk", _values(torch.topk), "topk(x, k, dim=-1, largest=True).values",
         "input, k: int, dim: dim = -1, largest: bool = True, sorted: bool = True", _topk,
         returns=VALUES, data_fields=("indices",)),
    _row("kthvalue", _values(torch.kthvalue), "kthvalue(x, k, dim=-1).values: the k-th "
         "smallest", "input, k: int, dim: dim = -1, keepdim: bool = False",
         _along(torch.kthvalue, "k"), returns=VALUES, data_fields=("indices",)),
    _row("mode", _values(torch.mode), "mode(x, dim=-1).values: the most frequent value",
         ALONG, _along(torch.mode), returns=VALUES, data_fields=("indices",)),
    _row("median", _median(torch.median), "median(x[, dim, keepdim]): the lower median",
         MEDIAN, _along(torch.median), values_when=("dim",)),
    _row("nanmedian", _median(torch.nanmedian), "nanmedian(x[, dim]): median, NaN ignored",
         MEDIAN, _along(torch.nanmedian), values_when=("dim",)),
    _row("cummax", _values(torch.cummax), "cummax(x, dim).values: running maximum",
         "input, dim: dim", _cumulative(torch.cummax), returns=VALUES,
         data_fields=("indices",)),
    _row("cummin", _values(torch.cummin), "cummin(x, dim).values: running minimum",
         "input, dim: dim", _cumulative(torch.cummin), returns=VALUES,
         data_fields=("indices",)),
    structural("quantile", _quantile_fn(torch.quantile), "quantile(x, q, dim=None): the "
               "q-th quantile of the sorted values", QUANTILE, HOW, decompose=_quantile),
    structural("nanquantile", _quantile_fn(torch.nanquantile), "nanquantile(x, q, ...): "
               "quantile, NaN ignored", QUANTILE, HOW, decompose=_quantile),
]

# The family `gradscope ops` lists these rows under (expr/ops/__init__.py reads it).
BY_FAMILY = {"reduction": ROWS}
