"""Rows that add copied elements together: index_add, scatter_add, scatter_reduce and
index_reduce (sum and mean), put, and F.fold (col2im). Their adjoints are the textbook ones on
plain tensors: what was added at an index reads the upstream back from there (index_select,
gather, take), a mean divides by how many elements met, and fold's adjoint is unfold (im2col).
`put` without accumulate overwrites: a copy, traced like the rows of `indexing`."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from gradscope.expr.ops.base import Op, Tensor, linear_jvp, structural
from gradscope.expr.ops.indexing import copy_jvp, copy_vjp

Adjoint = Callable[..., list[Tensor | None]]


def _index_add(x: Tensor, index: Tensor, source: Tensor, dim: int, alpha: float = 1.0
               ) -> Tensor:
    return x.index_add(dim, index, source, alpha=alpha)


def _index_add_vjp(g: Tensor, out: Tensor, args: Sequence[Any], p: dict) -> list:
    _, index, _ = args
    return [g, None, p.get("alpha", 1.0) * g.index_select(p["dim"], index)]


def _scatter_add(x: Tensor, index: Tensor, src: Tensor, dim: int) -> Tensor:
    return x.scatter_add(dim, index, src)


def _into(src: Tensor, part: Tensor) -> Tensor:
    """A gradient for all of src from one for its first index.shape elements (scatter reads
    only those; src may be larger)."""
    if part.shape == src.shape:
        return part
    full = torch.zeros_like(src)
    full[tuple(slice(0, n) for n in part.shape)] = part
    return full


def _scatter_add_vjp(g: Tensor, out: Tensor, args: Sequence[Any], p: dict) -> list:
    _, index, src = args
    return [g, None, _into(src, g.gather(p["dim"], index))]


def _scatter_reduce(x: Tensor, index: Tensor, src: Tensor, dim: int, reduce: str,
                    include_self: bool = True) -> Tensor:
    return x.scatter_reduce(dim, index, src, reduce, include_self=include_self)


def _met(x: Tensor, src: Tensor, include_self: bool,
         add: Callable[[Tensor, Tensor], Tensor]) -> tuple[Tensor, Tensor]:
    """Per output element: how many elements were added there, and whether x's own is one."""
    hits = add(torch.zeros_like(x), torch.ones_like(src))
    own = torch.ones_like(x) if include_self else (hits == 0).to(x.dtype)
    return hits + own, own


def _reduce_vjp(select: Callable[[Tensor, Tensor, int], Tensor],
                add: Callable[[Tensor, Tensor, Tensor, int], Tensor]) -> Adjoint:
    """scatter_reduce / index_reduce with sum or mean: x's own element counts where it is
    included (everywhere nothing was added), each added element reads the upstream back."""
    def vjp(g: Tensor, out: Tensor, args: Sequence[Any], p: dict) -> list:
        x, index, src = args
        d = p["dim"]
        count, own = _met(x, src, p.get("include_self", True),
                          lambda base, ones: add(base, index, ones, d))
        share = g / count if p["reduce"] == "mean" else g.expand(x.shape)
        return [share * own, None, _into(src, select(share, index, d))]
    return vjp


def _reduce_jvp(fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
    def jvp(ts: Sequence[Any], out: Tensor, args: Sequence[Any], p: dict) -> Tensor:
        x, index, src = args
        tx = torch.zeros_like(x) if ts[0] is None else ts[0].expand_as(x)
        tsrc = torch.zeros_like(src) if ts[2] is None else ts[2].expand_as(src)
        return fn(tx, index, tsrc, **p)
    return jvp


def _index_reduce(x: Tensor, index: Tensor, source: Tensor, dim: int, reduce: str,
                  include_self: bool = True) -> Tensor:
    with warnings.catch_warnings():  # "index_reduce() is in beta": torch's, not the user's
        warnings.simplefilter("ignore", UserWarning)
        return x.index_reduce(dim, index, source, reduce, include_self=include_self)


def _put(x: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
    return x.put(index, source, accumulate)


def _put_vjp(g: Tensor, out: Tensor, args: Sequence[Any], p: dict) -> list:
    if not p.get("accumulate"):
        return copy_vjp(_put)(g, out, args, p)
    _, index, source = args
    return [g, None, g.reshape(-1)[index.reshape(-1)].reshape(source.shape)]


def _fold(x: Tensor, output_size: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
          stride: Any = 1) -> Tensor:
    return F.fold(x, output_size, kernel_size, dilation, padding, stride)


def _fold_vjp(g: Tensor, out: Tensor, args: Sequence[Any], p: dict) -> list:
    return [F.unfold(g, p["kernel_size"], p.get("dilation", 1), p.get("padding", 0),
                     p.get("stride", 1))]


def _row(name: str, fn: Callable[..., Tensor], summary: str, sig: str, vjp: Adjoint,
         jvp: Callable[..., Tensor] | None = None, **kw: Any) -> Op:
    return structural(name, fn, summary, sig, vjp=vjp, jvp=jvp or _reduce_jvp(fn),
                      integer_args=("index",), integers_only=("index",), **kw)


REDUCE = ("input, dim: dim, index, src, reduce: str, include_self: bool = True")
SUM_OR_MEAN = {"reduce": ("sum", "mean")}
MEAN = {"reduce": ("mean",)}

ROWS = [
    _row("index_add", _index_add, "index_add(x, dim, index, source, alpha=1): source's "
         "slices added at index", "input, dim: dim, index, source, alpha: float = 1.0",
         _index_add_vjp),
    _row("scatter_add", _scatter_add, "scatter_add(x, dim, index, src)",
         "input, dim: dim, index, src", _scatter_add_vjp),
    _row("scatter_reduce", _scatter_reduce, "scatter_reduce(x, dim, index, src, reduce, "
         "include_self=True), reduce 'sum' or 'mean'", REDUCE,
         _reduce_vjp(lambda g, i, d: g.gather(d, i),
                     lambda base, i, ones, d: base.scatter_add(d, i, ones)),
         choices=SUM_OR_MEAN),
    _row("index_reduce", _index_reduce, "index_reduce(x, dim, index, source, 'mean', "
         "include_self=True)", REDUCE.replace("src", "source"),
         _reduce_vjp(lambda g, i, d: g.index_select(d, i),
                     lambda base, i, ones, d: base.index_add(d, i, ones)),
         choices=MEAN),
    _row("put", _put, "put(x, index, source, accumulate=False): x flattened, source written "
         "(or added) at index", "input, index, source, accumulate: bool = False", _put_vjp,
         copy_jvp(_put)),
    structural("fold", _fold, "F.fold(x, output_size, kernel_size, ...): columns summed "
               "back into an image (col2im)", "input, output_size: ints, kernel_size: ints, "
               "dilation: ints = 1, padding: ints = 0, stride: ints = 1", vjp=_fold_vjp,
               jvp=linear_jvp(_fold)),
]

# The family `gradscope ops` lists these rows under (expr/ops/__init__.py reads it).
BY_FAMILY = {"indexing": ROWS}
