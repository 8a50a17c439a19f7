"""torch functions that return a tuple, one part picked by the expression (`chunk(x, 2)[1]`,
`torch.var_mean(x)[0]`, `torch.aminmax(x).max`): the splits (chunk, split, tensor_split,
hsplit/vsplit/dsplit, unbind and their copies), meshgrid and broadcast_tensors, and the paired
reductions (aminmax, var_mean, std_mean). Each part is another row: a narrow, a select, an
expand, a reduction; the symbolic engine differentiates that (`decompose`) while torch runs its
own function. The part picked reaches both as the static parameter `_item`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from gradscope.expr import ir
from gradscope.expr.ops.base import Build, Op, Tensor, picked, structural

Decompose = Callable[..., ir.Node]
PARTS = ("*",)


def _static(p: dict) -> dict:
    return {k: v for k, v in p.items() if k != "_item"}


def _narrowed(fn: Callable[..., Any], dim_of: Callable[[Tensor, dict], int]) -> Decompose:
    """A split's part as a narrow: the parts' sizes read from torch's own split of a meta
    tensor, the part starting where the ones before it end."""
    def decompose(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
                  names: Sequence[str] = ()) -> ir.Node:
        parts = fn(metas[0], *_static(p).values())
        k = p["_item"] % len(parts)
        d = dim_of(metas[0], _static(p)) % max(metas[0].ndim, 1)
        start = sum(part.shape[d] for part in parts[:k])
        return b("narrow", args[0], dim=d, start=start, length=parts[k].shape[d])
    return decompose


def _dim(x: Tensor, p: dict) -> int:
    return p.get("dim", 0)


def _split_dim(fixed: int) -> Callable[[Tensor, dict], int]:
    """hsplit splits dim 1 (dim 0 of a 1-D tensor), vsplit dim 0, dsplit dim 2."""
    return lambda x, p: 0 if fixed == 1 and x.ndim == 1 else fixed


def _unbound(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
             names: Sequence[str] = ()) -> ir.Node:
    return b("select", args[0], dim=p.get("dim", 0), index=p["_item"])


def _meshed(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
            names: Sequence[str] = ()) -> ir.Node:
    k = p["_item"] % len(args)
    sizes = [m.numel() for m in metas]
    place = list(range(len(args)))
    if p.get("indexing") == "xy" and len(args) >= 2:  # torch: the first two swapped
        place[0], place[1] = 1, 0
        sizes[0], sizes[1] = sizes[1], sizes[0]
    shape = [1] * len(args)
    shape[place[k]] = metas[k].numel()
    return b("expand", b("reshape", args[k], shape=tuple(shape)), size=tuple(sizes))


def _broadcast(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
               names: Sequence[str] = ()) -> ir.Node:
    k = p["_item"] % len(args)
    shape = torch.broadcast_shapes(*[m.shape for m in metas])
    return b("expand", args[k], size=tuple(shape))


def _paired(first: str, second: str) -> Decompose:
    """(first, second) of one reduction pair: aminmax is (amin, amax), var_mean (var,
    mean)."""
    def decompose(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
                  names: Sequence[str] = ()) -> ir.Node:
        q = _static(p)
        row = first if p["_item"] % 2 == 0 else second
        if row == "mean":
            q = {k: v for k, v in q.items() if k in ("dim", "keepdim")}
        return b(row, *args, **q)
    return decompose


def _aminmax(x: Tensor, dim: int | None = None, keepdim: bool = False) -> Any:
    return torch.aminmax(x, dim=dim, keepdim=keepdim)


def _moments(fn: Callable[..., Any]) -> Callable[..., Any]:
    def run(x: Tensor, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False,
            correction: float | None = None) -> Any:
        c = float(correction) if correction is not None else (0.0 if unbiased is False else 1.0)
        return fn(x, dim=dim, correction=c, keepdim=keepdim)
    return run


def _meshgrid(*tensors: Tensor, indexing: str = "ij") -> Any:
    return torch.meshgrid(*tensors, indexing=indexing)


def _broadcast_tensors(*tensors: Tensor) -> Any:
    return torch.broadcast_tensors(*tensors)


def _row(name: str, fn: Callable[..., Any], summary: str, sig: str, decompose: Decompose,
         returns: tuple[str, ...] = PARTS, positional: bool = False, **kw: Any) -> Op:
    return structural(name, picked(fn, positional), summary, sig, decompose=decompose,
                      returns=returns, **kw)


def _split(name: str, summary: str, sig: str, dim_of: Callable[[Tensor, dict], int] = _dim,
           ) -> Op:
    fn = getattr(torch, name)
    return _row(name, fn, summary, sig, _narrowed(fn, dim_of), positional=True)


SPLIT = "input, split_size_or_sections: ints, dim: dim = 0"
SIZES = "input, split_sizes: ints, dim: dim = 0"
SECTIONS = "input, indices_or_sections: ints<4096>"
MOMENTS = ("input, dim: dims = None, unbiased: bool = None, keepdim: bool = False, "
           "correction: float = None")

SPLIT_ROWS = [
    _split("chunk", "chunk(x, chunks, dim=0)[k]: the k-th of about equal parts",
           "input, chunks: int<4096>, dim: dim = 0"),
    _split("unsafe_chunk", "unsafe_chunk(x, chunks, dim=0)[k] (as chunk)",
           "input, chunks: int<4096>, dim: dim = 0"),
    _split("split", "split(x, size or sizes, dim=0)[k]", SPLIT),
    _split("unsafe_split", "unsafe_split(x, size, dim=0)[k] (as split)", SPLIT),
    _split("split_with_sizes", "split_with_sizes(x, sizes, dim=0)[k]", SIZES),
    _split("split_with_sizes_copy", "split_with_sizes_copy(x, sizes, dim=0)[k]", SIZES),
    _split("tensor_split", "tensor_split(x, sections or indices, dim=0)[k]",
           "input, indices_or_sections: ints<4096>, dim: dim = 0"),
    _split("hsplit", "hsplit(x, sections or indices)[k] (along dim 1; dim 0 of a vector)",
           SECTIONS, _split_dim(1)),
    _split("vsplit", "vsplit(x, sections or indices)[k] (along dim 0)", SECTIONS,
           _split_dim(0)),
    _split("dsplit", "dsplit(x, sections or indices)[k] (along dim 2)", SECTIONS,
           _split_dim(2)),
    _row("unbind", torch.unbind, "unbind(x, dim=0)[k]: x[k] along dim", "input, dim: dim = 0",
         _unbound),
    _row("unbind_copy", torch.unbind_copy, "unbind_copy(x, dim=0)[k] (as unbind)",
         "input, dim: dim = 0", _unbound),
    _row("meshgrid", _meshgrid, "meshgrid(x, y, ..., indexing='ij')[k]",
         "*tensors: list, indexing: str = 'ij'", _meshed, choices={"indexing": ("ij", "xy")}),
    _row("broadcast_tensors", _broadcast_tensors, "broadcast_tensors(x, y, ...)[k]",
         "*tensors: list", _broadcast),
]
PAIR_ROWS = [
    _row("aminmax", _aminmax, "aminmax(x, dim=None, keepdim=False).min / .max",
         "input, dim: dim = None, keepdim: bool = False", _paired("min", "max"),
         returns=("min", "max")),
    _row("var_mean", _moments(torch.var_mean), "var_mean(x, dim=None, ...)[0] / [1]",
         MOMENTS, _paired("var", "mean"), returns=("var", "mean")),
    _row("std_mean", _moments(torch.std_mean), "std_mean(x, dim=None, ...)[0] / [1]",
         MOMENTS, _paired("std", "mean"), returns=("std", "mean")),
]
ROWS = SPLIT_ROWS + PAIR_ROWS

# The families `gradscope ops` lists these rows under (expr/ops/__init__.py reads them).
BY_FAMILY = {"shape": SPLIT_ROWS, "reduction": PAIR_ROWS}
