"""Shape rows: reshapes, transposes, permutations, flips, rolls, expansion, concatenation,
stacking, indexing and gathering. All are linear, so each forward-mode derivative is the op
itself applied to the tangent, and each adjoint is the inverse movement written with plain
tensor ops (a reshape back, the inverse permutation, a split, a scatter), never autograd."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from gradscope.expr.ops.base import Op, Tensor, linear_jvp, structural
from gradscope.tensors import sum_to_shape

Adjoint = Callable[[Tensor, Tensor, Sequence[Tensor], dict], list[Tensor]]


def _row(name: str, fn: Callable[..., Tensor], summary: str, sig: str, vjp: Adjoint,
         linear: tuple[int, ...] | None = None, **kw: Any) -> Op:
    return structural(name, fn, summary, sig, vjp=vjp, jvp=linear_jvp(fn, linear), **kw)


def _back_reshape(g: Tensor, out: Tensor, args: Sequence[Tensor], p: dict) -> list[Tensor]:
    return [g.reshape(args[0].shape)]


def _reshape(x: Tensor, shape: tuple[int, ...]) -> Tensor:
    return x.reshape(shape)


def _flatten(x: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    return torch.flatten(x, start_dim, end_dim)


def _squeeze(x: Tensor, dim: Any = None) -> Tensor:
    return x.squeeze() if dim is None else x.squeeze(dim)


def _transpose(x: Tensor, dim0: int, dim1: int) -> Tensor:
    return x.transpose(dim0, dim1)


def _back_transpose(g: Tensor, out: Tensor, args: Sequence[Tensor], p: dict) -> list[Tensor]:
    return [g.transpose(p["dim0"], p["dim1"])]


def _permute(x: Tensor, dims: tuple[int, ...]) -> Tensor:
    return x.permute(dims)


def _back_permute(g: Tensor, out: Tensor, args: Sequence[Tensor], p: dict) -> list[Tensor]:
    n = args[0].ndim
    order = [d % n for d in p["dims"]] if n else []
    inverse = [order.index(i) for i in range(n)]
    return [g.permute(inverse)]


def _reverse(x: Tensor) -> Tensor:
    # x.T, without torch's deprecation warning (a 0-d tensor is its own transpose, as in torch)
    return x.permute(*reversed(range(x.ndim))) if x.ndim else x.view(())


def _back_reverse(g: Tensor, out: Tensor, args: Sequence[Tensor], p: dict) -> list[Tensor]:
    return [_reverse(g)]


def _mt(x: Tensor) -> Tensor:
    return x.transpose(-2, -1)


def _back_mt(g: Tensor, out: Tensor, args: Sequence[Tensor], p: dict) -> list[Tensor]:
    return [g.transpose(-2, -1)]


def _t(x: Tensor) -> Tensor:
    return x.t()


def _back_t(g: Tensor, out: Tensor, args: Sequence[Tensor], p: dict) -> list[Tensor]:
    return [g.t()]


def _expand(x: Tensor, size: tuple[int, ...]) -> Tensor:
    return x.expand(size)


def _back_expand(g: Tensor, out: Tensor, args: Sequence[Tensor], p: dict) -> list[Tensor]:
    return [sum_to_shape(g, args[0].shape)]


def _flip(x: Tensor, dims: tuple[int, ...]) -> Tensor:
    return x.flip(dims)


def _back_flip(g: Tensor, out: Tensor, args: Sequence[Tensor], p: dict) -> list[Tensor]:
    return [g.flip(p["dims"])]


def _roll(x: Tensor, shifts: Any, dims: Any = None) -> Tensor:
    return torch.roll(x, shifts, dims)


def _back_roll(g: Tensor, out: Tensor, args: Sequence[Tensor], p: dict) -> list[Tensor]:
    shifts = p["shifts"]
    back = -shifts if isinstance(shifts, int) else tuple(-s for s in shifts)
    return [torch.roll(g, back, p.get("dims"))]


def _cat(*tensors: Tensor, dim: int = 0) -> Tensor:
    return torch.cat(tensors, dim)


def _back_cat(g: Tensor, out: Tensor, args: Sequence[Tensor], p: dict) -> list[Tensor]:
    sizes = [a.shape[p["dim"]] for a in args]
    return list(g.split(sizes, p["dim"]))


def _stack(*tensors: Tensor, dim: int = 0) -> Tensor:
    return torch.stack(tensors, dim)


def _back_stack(g: Tensor, out: Tensor, args: Sequence[Tensor], p: dict) -> list[Tensor]:
    return list(g.unbind(p["dim"]))


def python_index(index: tuple[tuple, ...]) -> tuple:
    """A subscript as the parser stored it → the Python index torch takes."""
    parts: list[Any] = []
    for item in index:
        kind = item[0]
        parts.append(slice(*item[1:]) if kind == "slice" else None if kind == "none"
                     else Ellipsis if kind == "ellipsis" else item[1])
    return tuple(parts)


def _index(x: Tensor, index: tuple[tuple, ...]) -> Tensor:
    return x[python_index(index)]


def _back_index(g: Tensor, out: Tensor, args: Sequence[Tensor], p: dict) -> list[Tensor]:
    full = torch.zeros_like(args[0])
    full[python_index(p["index"])] = g  # basic indexing picks each element at most once
    return [full]


def _narrow(x: Tensor, dim: int, start: int, length: int) -> Tensor:
    return x.narrow(dim, start, length)


def _back_narrow(g: Tensor, out: Tensor, args: Sequence[Tensor], p: dict) -> list[Tensor]:
    full = torch.zeros_like(args[0])
    full.narrow(p["dim"], p["start"], p["length"]).copy_(g)
    return [full]


def _gather_fn(x: Tensor, index: Tensor, dim: int) -> Tensor:
    return torch.gather(x, dim, index)


def _back_gather(g: Tensor, out: Tensor, args: Sequence[Tensor], p: dict) -> list[Tensor]:
    x, index = args
    return [torch.zeros_like(x).scatter_add(p["dim"], index, g), None]


ROWS = [
    _row("reshape", _reshape, "reshape(x, *shape) (-1 infers one size)", "input, *shape: shape",
         _back_reshape, aliases=("view",), methods=("view",)),
    _row("flatten", _flatten, "flatten(x, start_dim=0, end_dim=-1)",
         "input, start_dim: dim = 0, end_dim: dim = -1", _back_reshape),
    _row("squeeze", _squeeze, "squeeze(x[, dim]) drops dims of size 1",
         "input, dim: dims = None", _back_reshape),
    _row("unsqueeze", torch.unsqueeze, "unsqueeze(x, dim) adds a dim of size 1",
         "input, dim: dim", _back_reshape),
    _row("transpose", _transpose, "transpose(x, dim0, dim1)", "input, dim0: dim, dim1: dim",
         _back_transpose, aliases=("swapaxes", "swapdims")),
    _row("permute", _permute, "permute(x, *dims)", "input, *dims: shape", _back_permute),
    _row("T", _reverse, "x.T: the dims reversed", "input", _back_reverse, symbol=".T"),
    _row("mT", _mt, "x.mT: the last two dims swapped", "input", _back_mt, symbol=".mT"),
    _row("t", _t, "t(x): transpose of a matrix (<= 2 dims)", "input", _back_t),
    _row("expand", _expand, "expand(x, *size) (-1 keeps a size)", "input, *size: shape",
         _back_expand, aliases=("broadcast_to",)),
    _row("flip", _flip, "flip(x, dims)", "input, *dims: shape", _back_flip),
    _row("roll", _roll, "roll(x, shifts, dims=None)", "input, shifts: ints, dims: ints = None",
         _back_roll),
    _row("cat", _cat, "cat([x, y, ...], dim=0)", "*tensors: list, dim: dim = 0", _back_cat,
         aliases=("concat", "concatenate")),
    _row("stack", _stack, "stack([x, y, ...], dim=0)", "*tensors: list, dim: dim = 0",
         _back_stack),
    _row("index", _index, "x[i, a:b:s, None, ...] with constant ints and slices",
         "input, index: index", _back_index, symbol="[]"),
    _row("narrow", _narrow, "narrow(x, dim, start, length)",
         "input, dim: dim, start: int, length: int", _back_narrow),
    _row("gather", _gather_fn, "gather(x, dim, index), index a --const integer tensor",
         "input, dim: dim, index", _back_gather, linear=(0,), integer_args=("index",),
         integers_only=("index",)),
]

# The family `gradscope ops` lists these rows under (expr/ops/__init__.py reads it).
BY_FAMILY = {"shape": ROWS}
