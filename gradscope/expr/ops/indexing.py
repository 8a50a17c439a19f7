"""Rows that copy elements from one place to another, the places given by data or by the
call's constants: index_select, take, take_along_dim, masked_select/masked_fill/masked_scatter,
where with a mask, index_fill/index_copy, scatter, the *_scatter family, as_strided,
repeat_interleave, pixel_(un)shuffle, channel_shuffle, unfold (both), diag_embed, diagflat,
block_diag, the stacks, cartesian_prod, combinations, pad (every mode), embedding,
max_unpool; and the ones that add what they copy (index_add, scatter_add, put, fold).

Each output element of a copy is one input element or a constant. Which one is read off
torch's own forward run on *tracers*: every input element replaced by its position (1, 2, ...,
across all the float inputs), the constant part (a pad value, a fill) removed by a second run
on zeros. The adjoint adds each upstream value to the element it came from; the tangent is the
op on the tangents. Torch's backward kernels are never used."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from gradscope.errors import UsageError
from gradscope.expr.ops.base import Op, Tensor, structural

Fn = Callable[..., Tensor]


def _sources(args: Sequence[Any]) -> list[int]:
    """The float tensor arguments: the values copied (indices and masks are data)."""
    return [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.is_floating_point()]


def _with(args: Sequence[Any], new: dict[int, Tensor]) -> list[Any]:
    return [new.get(i, a) for i, a in enumerate(args)]


def _affine_part(fn: Fn, args: Sequence[Any], p: dict) -> Tensor:
    """The op on zeros: what it writes that no input element gives (pad values, fills)."""
    return fn(*_with(args, {i: torch.zeros_like(args[i]) for i in _sources(args)}), **p)


def copy_vjp(fn: Fn) -> Callable[..., list[Tensor | None]]:
    """The adjoint of a copy: each upstream value added to the element its output came from,
    found by running `fn` on tracers (element k of the float inputs, numbered together, is
    k + 1; 0 is a constant). Exact in float64 below 2**53 elements."""
    def vjp(g: Tensor, out: Tensor, args: Sequence[Any], p: dict) -> list[Tensor | None]:
        sources, start = _sources(args), 1
        tracers, spans = {}, {}
        for i in sources:
            n = args[i].numel()
            tracers[i] = torch.arange(start, start + n, dtype=torch.float64,
                                      device=args[i].device).reshape(args[i].shape)
            spans[i], start = (start, n), start + n
        ids = fn(*_with(args, tracers), **p) - _affine_part(fn, args, p).to(torch.float64)
        flat = torch.zeros(start, dtype=g.dtype, device=g.device)
        flat.index_add_(0, ids.round().long().reshape(-1), g.expand(out.shape).reshape(-1))
        return [flat[spans[i][0]:sum(spans[i])].reshape(args[i].shape) if i in spans else None
                for i in range(len(args))]
    return vjp


def copy_jvp(fn: Fn) -> Callable[..., Tensor]:
    """The tangent of an affine op: the op on the tangents, its constant part removed."""
    def jvp(ts: Sequence[Any], out: Tensor, args: Sequence[Any], p: dict) -> Tensor:
        tangents = {i: (ts[i] if ts[i] is not None else torch.zeros_like(args[i]))
                    .expand_as(args[i]) for i in _sources(args)}
        return fn(*_with(args, tangents), **p) - _affine_part(fn, args, p)
    return jvp


def _copy(name: str, fn: Fn, summary: str, sig: str, indices: tuple[str, ...] = (),
          mask: str | None = None, **kw: Any) -> Op:
    """A copy row; `indices` take integer data only, a `mask` integers or bools (kept as
    they are, _mask refuses floats)."""
    return structural(name, fn, summary, sig, vjp=copy_vjp(fn), jvp=copy_jvp(fn),
                      integer_args=indices + ((mask,) if mask else ()),
                      integers_only=indices, **kw)


def _mask(mask: Tensor, name: str = "mask") -> Tensor:
    """A mask given as data: bool as it is, integers nonzero (the command line has no bool
    literal: --const m=1,0,1)."""
    if mask.dtype == torch.bool:
        return mask
    if mask.is_floating_point():
        raise UsageError(f"`{name}` is a mask: give it as data with --const NAME=1,0,1 "
                         "(nonzero is True) or as a bool tensor")
    return mask != 0


def _masked_select(x: Tensor, mask: Tensor) -> Tensor:
    return torch.masked_select(x, _mask(mask))


def _index_select(x: Tensor, index: Tensor, dim: int) -> Tensor:
    return torch.index_select(x, dim, index)


def _take_along_dim(x: Tensor, indices: Tensor, dim: int | None = None) -> Tensor:
    return torch.take_along_dim(x, indices, dim)


def _masked_fill(x: Tensor, mask: Tensor, value: Tensor) -> Tensor:
    return x.masked_fill(_mask(mask), value)


def _where(condition: Tensor, x: Tensor, other: Tensor) -> Tensor:
    return torch.where(_mask(condition, "condition"), x, other)


def _index_fill(x: Tensor, index: Tensor, value: Tensor, dim: int) -> Tensor:
    return x.index_fill(dim, index, value)


def _index_copy(x: Tensor, index: Tensor, source: Tensor, dim: int) -> Tensor:
    return x.index_copy(dim, index, source)


def _scatter(x: Tensor, index: Tensor, src: Tensor, dim: int) -> Tensor:
    src = src.expand(index.shape) if src.ndim == 0 else src  # scatter(x, 0, i, 1.5)
    return x.scatter(dim, index, src)


def _masked_select_bound(x: Tensor, mask: Tensor) -> Tensor:
    """On meta tensors: every element selected."""
    numel = math.prod(torch.broadcast_shapes(x.shape, mask.shape))
    return torch.empty(numel, dtype=x.dtype, device=x.device)


def _combinations_bound(x: Tensor, r: int = 2, with_replacement: bool = False) -> Tensor:
    """On meta tensors: C(n, r) rows (C(n + r - 1, r) with replacement) of r elements."""
    n = x.numel()
    rows = math.comb(n + r - 1, r) if with_replacement else math.comb(n, max(r, 0))
    return torch.empty((rows, r), dtype=x.dtype, device=x.device)


def _masked_scatter(x: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    return x.masked_scatter(_mask(mask), source)


def _strided(fn: Fn) -> Fn:
    # on the values laid out in order: a tracer is a fresh contiguous tensor, so the layout a
    # view happens to have must not decide which element is read
    def run(x: Tensor, *rest: Any, **p: Any) -> Tensor:
        return fn(x.contiguous(), *[r.contiguous() if isinstance(r, Tensor) else r
                                    for r in rest], **p)
    return run


def _repeat_interleave(x: Tensor, repeats: int, dim: int | None = None) -> Tensor:
    return torch.repeat_interleave(x, repeats, dim)


def _unfold_dim(x: Tensor, dimension: int, size: int, step: int) -> Tensor:
    return x.unfold(dimension, size, step)


def _im2col(x: Tensor, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
            stride: Any = 1) -> Tensor:
    return F.unfold(x, kernel_size, dilation, padding, stride)


def _listed(fn: Callable[[Sequence[Tensor]], Tensor]) -> Fn:
    def run(*tensors: Tensor) -> Tensor:
        return fn(tensors)
    run.__name__ = fn.__name__
    return run


def _pad(x: Tensor, pad: tuple[int, ...], mode: str = "constant",
         value: float | None = None) -> Tensor:
    return F.pad(x, pad, mode, value)


def _constant_pad(x: Tensor, pad: tuple[int, ...], value: float = 0.0) -> Tensor:
    return F.pad(x, pad, "constant", value)


def _embedding(input: Tensor, weight: Tensor) -> Tensor:
    return F.embedding(input, weight)


def _unpool(fn: Fn) -> Fn:
    def run(x: Tensor, indices: Tensor, kernel_size: Any, stride: Any = None,
            padding: Any = 0, output_size: Any = None) -> Tensor:
        return fn(x, indices, kernel_size, stride, padding, output_size)
    return run


SCATTER = "input, dim: dim, index, src"
STRIDED = "input, size: ints, stride: ints, storage_offset: int = None"
UNPOOL = ("input, indices, kernel_size: ints, stride: ints = None, padding: ints = 0, "
          "output_size: ints = None")
PAD_MODES = {"mode": ("constant", "reflect", "replicate", "circular")}

SELECT_ROWS = [
    _copy("index_select", _index_select, "index_select(x, dim, index), index --const data",
          "input, dim: dim, index", ("index",)),
    _copy("take", torch.take, "take(x, index): x flattened, at index (--const data)",
          "input, index", ("index",)),
    _copy("take_along_dim", _take_along_dim, "take_along_dim(x, indices, dim=None)",
          "input, indices, dim: dim = None", ("indices",)),
    _copy("masked_select", _masked_select, "masked_select(x, mask): the elements where the "
          "mask (--const data) is True", "input, mask", mask="mask",
          bound=_masked_select_bound),
    _copy("masked_fill", _masked_fill, "masked_fill(x, mask, value): value where the mask is "
          "True", "input, mask, value", mask="mask"),
    _copy("masked_where", _where, "where(mask, x, y) with a mask given as --const data",
          "condition, input, other", mask="condition"),
    _copy("index_fill", _index_fill, "index_fill(x, dim, index, value)",
          "input, dim: dim, index, value", ("index",)),
    _copy("index_copy", _index_copy, "index_copy(x, dim, index, source)",
          "input, dim: dim, index, source", ("index",)),
    _copy("scatter", _scatter, "scatter(x, dim, index, src): src written at index",
          SCATTER, ("index",)),
    _copy("masked_scatter", _masked_scatter, "masked_scatter(x, mask, source)",
          "input, mask, source", mask="mask"),
    _copy("diagonal_scatter", torch.diagonal_scatter, "diagonal_scatter(x, src, offset=0, "
          "dim1=0, dim2=1)", "input, src, offset: int = 0, dim1: dim = 0, dim2: dim = 1"),
    _copy("select_scatter", torch.select_scatter, "select_scatter(x, src, dim, index)",
          "input, src, dim: dim, index: int"),
    _copy("slice_scatter", torch.slice_scatter, "slice_scatter(x, src, dim=0, start, end, "
          "step=1)", "input, src, dim: dim = 0, start: int = None, end: int = None, "
          "step: int = 1"),
    _copy("as_strided", _strided(torch.as_strided), "as_strided(x, size, stride, "
          "storage_offset) over x's elements in order", STRIDED),
    _copy("as_strided_copy", _strided(torch.as_strided_copy), "as_strided_copy (as "
          "as_strided)", STRIDED),
    _copy("as_strided_scatter", _strided(torch.as_strided_scatter), "as_strided_scatter(x, "
          "src, size, stride, storage_offset)",
          "input, src, size: ints, stride: ints, storage_offset: int = None"),
    _copy("embedding", _embedding, "embedding(indices, weight): rows of weight, indices "
          "--const data", "input, weight", ("input",)),
]

LAYOUT_ROWS = [
    _copy("repeat_interleave", _repeat_interleave, "repeat_interleave(x, repeats, dim=None)",
          "input, repeats: int, dim: dim = None"),
    _copy("pixel_shuffle", F.pixel_shuffle, "pixel_shuffle(x, upscale_factor)",
          "input, upscale_factor: int"),
    _copy("pixel_unshuffle", F.pixel_unshuffle, "pixel_unshuffle(x, downscale_factor)",
          "input, downscale_factor: int"),
    _copy("channel_shuffle", F.channel_shuffle, "channel_shuffle(x, groups)",
          "input, groups: int"),
    _copy("unfold", _im2col, "F.unfold(x, kernel_size, dilation=1, padding=0, stride=1): "
          "sliding windows as columns (im2col)", "input, kernel_size: ints, dilation: ints "
          "= 1, padding: ints = 0, stride: ints = 1"),
    _copy("unfold_copy", _unfold_dim, "x.unfold(dim, size, step): windows along dim",
          "input, dimension: dim, size: int, step: int", methods=("unfold",)),
    _copy("diag_embed", torch.diag_embed, "diag_embed(x, offset=0, dim1=-2, dim2=-1)",
          "input, offset: int = 0, dim1: dim = -2, dim2: dim = -1"),
    _copy("diagflat", torch.diagflat, "diagflat(x, offset=0)", "input, offset: int = 0"),
    _copy("block_diag", torch.block_diag, "block_diag(a, b, ...)", "*tensors"),
    _copy("hstack", _listed(torch.hstack), "hstack([x, y, ...])", "*tensors: list"),
    _copy("vstack", _listed(torch.vstack), "vstack([x, y, ...])", "*tensors: list",
          aliases=("row_stack",)),
    _copy("dstack", _listed(torch.dstack), "dstack([x, y, ...])", "*tensors: list"),
    _copy("column_stack", _listed(torch.column_stack), "column_stack([x, y, ...])",
          "*tensors: list"),
    _copy("cartesian_prod", torch.cartesian_prod, "cartesian_prod(x, y, ...)", "*tensors"),
    _copy("combinations", torch.combinations, "combinations(x, r=2, with_replacement=False)",
          "input, r: int<64> = 2, with_replacement: bool = False", bound=_combinations_bound),
    _copy("pad", _pad, "F.pad(x, pad, mode='constant', value=None): constant, reflect, "
          "replicate, circular", "input, pad: ints, mode: str = 'constant', "
          "value: float = None", choices=PAD_MODES),
    _copy("constant_pad_nd", _constant_pad, "constant_pad_nd(x, pad, value=0)",
          "input, pad: ints, value: float = 0.0"),
    _copy("max_unpool1d", _unpool(F.max_unpool1d), "max_unpool1d(x, indices, kernel_size, "
          "...)", UNPOOL, ("indices",)),
    _copy("max_unpool2d", _unpool(F.max_unpool2d), "max_unpool2d(x, indices, kernel_size, "
          "...)", UNPOOL, ("indices",)),
    _copy("max_unpool3d", _unpool(F.max_unpool3d), "max_unpool3d(x, indices, kernel_size, "
          "...)", UNPOOL, ("indices",)),
]

ROWS = SELECT_ROWS + LAYOUT_ROWS

# The families `gradscope ops` lists these rows under (expr/ops/__init__.py reads them).
BY_FAMILY = {"indexing": SELECT_ROWS, "shape": LAYOUT_ROWS}
