"""Resampling and the poolings beyond conv.py's: interpolate (every mode, align_corners,
antialias), upsample_nearest/upsample_bilinear, average pooling in 1-3 dims (ceil_mode,
count_include_pad, divisor_override), adaptive average pooling, and max pooling in 3 dims and
adaptive max pooling.

Interpolation and average pooling are *separable*: the output is the input multiplied along
each spatial axis by one matrix. Each axis's matrix is read off torch's own forward run on an
identity along that axis (the other axes of size 1, where the op is the identity), and the
adjoint multiplies the upstream by the transposes. Nearest modes copy elements: traced like
`indexing`'s rows. Max pooling sends each upstream value back to the element torch's forward
picked (its indices), a kink where the pick changes. Torch's backward kernels are never used.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from gradscope.expr import ir
from gradscope.expr.ops.base import KINK, SATURATES, Build, Op, Tensor, linear_jvp, structural
from gradscope.expr.ops.indexing import copy_jvp, copy_vjp

OTHER = 2  # the size of the axes a probe does not measure
AxisParams = Callable[[Tensor, dict, int, int], dict]  # (x, params, axis, n axes) → params


def _spread(value: Any, axis: int, n: int, rest: Any) -> Any:
    """A per-axis parameter for a probe along `axis`: the call's value there, `rest`
    elsewhere (a tuple of n)."""
    if value is None:
        return None
    own = value[axis] if isinstance(value, tuple | list) else value
    return tuple(own if j == axis else rest for j in range(n))


PROBE_ELEMENTS = 1 << 22  # identity columns probed at once: their outputs stay ~32 MB


def _matrix(fn: Callable[..., Tensor], size: int, axis: int, n: int, params: dict,
            dtype: torch.dtype) -> Tensor:
    """The (out, in) matrix of `fn` along one spatial axis, sparse: fn of an identity laid out
    along that axis (batch = the identity's rows, one channel), constant along the other axes,
    which have size 2 and are kept at 2 (size 1 takes special paths in some kernels:
    antialias). The identity is probed a block of columns at a time and only the entries
    that are not zero kept: a pooling's matrix is a band, and a dense one over 20,000
    elements would hold 3 GB."""
    other = [slice(None) if j == axis else 0 for j in range(n)]
    rows, cols, values, out_size = [], [], [], 0
    width = OTHER ** (n - 1)
    step = max(1, PROBE_ELEMENTS // max(1, size * width))
    for start in range(0, size, step):
        stop = min(size, start + step)
        own = [size if j == axis else 1 for j in range(n)]
        probe = torch.zeros(stop - start, size, dtype=dtype)  # the identity's rows
        probe[torch.arange(stop - start), torch.arange(start, stop)] = 1.0
        probe = probe.reshape([stop - start, 1, *own])
        probe = probe.expand([stop - start, 1,
                              *[size if j == axis else OTHER for j in range(n)]])
        block = fn(probe.contiguous(), **params)[(slice(None), 0, *other)]  # (columns, out)
        out_size = block.shape[1]
        column, row = block.nonzero(as_tuple=True)
        rows.append(row)
        cols.append(column + start)
        values.append(block[column, row])
    index = torch.stack([torch.cat(rows), torch.cat(cols)])
    return torch.sparse_coo_tensor(index, torch.cat(values), (out_size, size),
                                   check_invariants=False).coalesce()


def _along(t: Tensor, matrix: Tensor, dim: int) -> Tensor:
    """`t` multiplied along `dim` by `matrix` (sparse, (new, old))."""
    moved = torch.movedim(t, dim, -1)
    flat = moved.reshape(-1, moved.shape[-1])
    product = torch.sparse.mm(matrix, flat.T).T  # (rest, new)
    return torch.movedim(product.reshape(*moved.shape[:-1], matrix.shape[0]), -1, dim)


def separable_vjp(fn: Callable[..., Tensor], axis_params: AxisParams, spatial: int | None,
                  scale: Callable[[dict], float] = lambda p: 1.0) -> Callable[..., list]:
    """The adjoint of an op that acts on each spatial axis by one matrix (`spatial` axes;
    None: all but batch and channel): the upstream times each matrix's transpose."""
    def vjp(g: Tensor, out: Tensor, args: Sequence[Tensor], p: dict) -> list[Tensor]:
        (x,) = args
        n = x.ndim - 2 if spatial is None else spatial
        for axis in range(n):
            dim = x.ndim - n + axis
            matrix = _matrix(fn, x.shape[dim], axis, n, axis_params(x, p, axis, n), x.dtype)
            g = _along(g, matrix.t().coalesce(), dim)
        return [g * scale(p)]
    return vjp


def _interpolate(x: Tensor, size: Any = None, scale_factor: Any = None,
                 mode: str = "nearest", align_corners: bool | None = None,
                 recompute_scale_factor: bool | None = None, antialias: bool = False) -> Tensor:
    return F.interpolate(x, size, scale_factor, mode, align_corners, recompute_scale_factor,
                         antialias)


def _interpolate_axis(x: Tensor, p: dict, axis: int, n: int) -> dict:
    return {**p, "size": _spread(p.get("size"), axis, n, OTHER),
            "scale_factor": _spread(p.get("scale_factor"), axis, n, 1.0)}


_NEAREST = ("nearest", "nearest-exact")
_interpolate_separable = separable_vjp(_interpolate, _interpolate_axis, None)


def _interpolate_vjp(g: Tensor, out: Tensor, args: Sequence[Tensor], p: dict) -> list:
    if p.get("mode", "nearest") in _NEAREST:
        return copy_vjp(_interpolate)(g, out, args, p)
    return _interpolate_separable(g, out, args, p)


def _upsample(mode: str, align_corners: bool | None) -> Any:
    def decompose(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
                  names: Sequence[str] = ()) -> ir.Node:
        return b("interpolate", *args, size=p.get("size"), scale_factor=p.get("scale_factor"),
                 mode=mode, align_corners=align_corners)
    return decompose


def _upsampled(mode: str, align_corners: bool | None) -> Callable[..., Tensor]:
    # F.upsample_* is F.interpolate with these, less its deprecation warning
    def run(x: Tensor, size: Any = None, scale_factor: Any = None) -> Tensor:
        return F.interpolate(x, size, scale_factor, mode, align_corners)
    return run


def _adaptive_avg(n: int) -> Callable[..., Tensor]:
    fn = (F.adaptive_avg_pool1d, F.adaptive_avg_pool2d, F.adaptive_avg_pool3d)[n - 1]

    def run(x: Tensor, output_size: Any) -> Tensor:
        return fn(x, output_size)
    return run


def _adaptive_axis(x: Tensor, p: dict, axis: int, n: int) -> dict:
    size = p["output_size"]
    own = size[axis] if isinstance(size, tuple) else size
    own = x.shape[x.ndim - n + axis] if own is None else own  # None keeps the input's size
    return {"output_size": tuple(own if j == axis else OTHER for j in range(n))}


def _avg(n: int) -> Callable[..., Tensor]:
    fn = (F.avg_pool1d, F.avg_pool2d, F.avg_pool3d)[n - 1]

    def run(x: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
            ceil_mode: bool = False, count_include_pad: bool = True,
            divisor_override: int | None = None) -> Tensor:
        extra = {} if n == 1 else {"divisor_override": divisor_override}
        return fn(x, kernel_size, stride, padding, ceil_mode, count_include_pad, **extra)
    return run


def _avg_axis(x: Tensor, p: dict, axis: int, n: int) -> dict:
    # with a divisor_override each axis sums (divisor 1) and the product is scaled once
    override = {} if n == 1 else {"divisor_override": 1 if p.get("divisor_override") else None}
    return {"kernel_size": _spread(p["kernel_size"], axis, n, 1),
            "stride": _spread(p.get("stride") or p["kernel_size"], axis, n, 1),
            "padding": _spread(p.get("padding", 0), axis, n, 0),
            "ceil_mode": p.get("ceil_mode", False),
            "count_include_pad": p.get("count_include_pad", True), **override}


def _override(p: dict) -> float:
    return 1.0 / p["divisor_override"] if p.get("divisor_override") else 1.0


def _avg_row(n: int) -> Op:
    fn = _avg(n)
    sig = ("input, kernel_size: ints, stride: ints = None, padding: ints = 0, "
           "ceil_mode: bool = False, count_include_pad: bool = True")
    sig += "" if n == 1 else ", divisor_override: int = None"
    return structural(f"avg_pool{n}d", fn, f"{n}-D average pooling (ceil_mode, "
                      "count_include_pad" + ("" if n == 1 else ", divisor_override") + ")",
                      sig, vjp=separable_vjp(fn, _avg_axis, n, _override),
                      jvp=linear_jvp(fn))


def _lp(n: int) -> Callable[..., Tensor]:
    fn = (F.lp_pool1d, F.lp_pool2d, F.lp_pool3d)[n - 1]

    def run(x: Tensor, norm_type: float, kernel_size: Any, stride: Any = None,
            ceil_mode: bool = False) -> Tensor:
        return fn(x, norm_type, kernel_size, stride, ceil_mode)
    return run


def _lp_pool(n: int) -> Any:
    """torch's own composition: the p-th powers averaged, times the window, to the 1/p (max
    pooling of |x| for p = ±inf)."""
    def decompose(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
                  names: Sequence[str] = ()) -> ir.Node:
        (x,), order, kernel = args, p["norm_type"], p["kernel_size"]
        pool = {"kernel_size": kernel, "stride": p["stride"], "ceil_mode": p["ceil_mode"]}
        if abs(order) == math.inf:
            name = "max_pool3d" if n == 3 else f"max_pool{n}d"
            sign = 1.0 if order > 0 else -1.0
            return b("mul", sign, b(name, b("mul", sign, b("abs", x)), **pool))
        out = b(f"avg_pool{n}d", b("pow", x, order), **pool)
        out = b("mul", b("sign", out), b("relu", b("abs", out)))
        size = math.prod(kernel) if isinstance(kernel, tuple) else kernel ** n
        return b("pow", b("mul", out, size), 1.0 / order)
    return decompose


# ---------------------------------------------------------------- max pooling by indices
def with_indices(fn: Callable[..., Any]) -> Callable[..., tuple[Tensor, Tensor]]:
    """A max pooling's (values, indices) for a call's parameters, whatever its
    return_indices."""
    def picked(x: Tensor, p: dict) -> tuple[Tensor, Tensor]:
        q = {k: v for k, v in p.items() if k != "return_indices"}
        return fn(x, **q, return_indices=True)
    return picked


def _flat(t: Tensor, n: int) -> Tensor:
    return t.flatten(start_dim=t.ndim - n)


def index_vjp(picked: Callable[..., tuple[Tensor, Tensor]], n: int) -> Callable[..., list]:
    """Each upstream value back to the element torch's forward picked (flat indices within
    each plane of `n` spatial axes)."""
    def vjp(g: Tensor, out: Tensor, args: Sequence[Tensor], p: dict) -> list[Tensor]:
        (x,) = args
        _, idx = picked(x, p)
        back = torch.zeros_like(_flat(x, n)).scatter_add(-1, _flat(idx, n),
                                                         _flat(g.expand(out.shape), n))
        return [back.reshape(x.shape)]
    return vjp


def index_jvp(picked: Callable[..., tuple[Tensor, Tensor]], n: int) -> Callable[..., Tensor]:
    def jvp(ts: Sequence[Tensor], out: Tensor, args: Sequence[Tensor], p: dict) -> Tensor:
        (x,) = args
        _, idx = picked(x, p)
        return _flat(ts[0].expand_as(x), n).gather(-1, _flat(idx, n)).reshape(out.shape)
    return jvp


def index_branch(picked: Callable[..., tuple[Tensor, Tensor]]) -> Callable[..., Tensor]:
    def branch(x: Tensor, **p: Any) -> Tensor:  # a tie or a new winner is a kink
        return picked(x, p)[1]
    return branch


def _values(fn: Callable[..., Any]) -> Callable[..., Tensor]:
    def run(x: Tensor, *args: Any, return_indices: bool = False, **kw: Any) -> Tensor:
        return fn(x, *args, **kw)
    return run


POOL_HINT = "max pooling passes the gradient only to the largest element of each window"


def _max_row(name: str, fn: Callable[..., Any], n: int, summary: str, sig: str,
             grad_fn: str) -> Op:
    picked = with_indices(fn)
    return structural(name, _values(fn), summary, sig, vjp=index_vjp(picked, n),
                      jvp=index_jvp(picked, n), branch=index_branch(picked), kink=KINK,
                      flow=SATURATES, hint=POOL_HINT, values_when=("return_indices",),
                      grad_fns=(grad_fn,))


def _max3d(x: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
           dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    return F.max_pool3d(x, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def _adaptive_max(n: int) -> Callable[..., Any]:
    fn = (F.adaptive_max_pool1d, F.adaptive_max_pool2d, F.adaptive_max_pool3d)[n - 1]

    def run(x: Tensor, output_size: Any, return_indices: bool = False) -> Any:
        return fn(x, output_size, return_indices)
    return run


INTERPOLATE = ("input, size: sizes = None, scale_factor: floats = None, mode: str = 'nearest', "
               "align_corners: bool = None, recompute_scale_factor: bool = None, "
               "antialias: bool = False")
MODES = {"mode": ("nearest", "nearest-exact", "linear", "bilinear", "bicubic", "trilinear",
                  "area")}
UPSAMPLE = "input, size: sizes = None, scale_factor: floats = None"
MAX3D = ("input, kernel_size: ints, stride: ints = None, padding: ints = 0, "
         "dilation: ints = 1, ceil_mode: bool = False, return_indices: bool = False")

ROWS = [
    structural("interpolate", _interpolate, "F.interpolate(x, size or scale_factor, mode, "
               "align_corners, antialias): every mode", INTERPOLATE, MODES,
               vjp=_interpolate_vjp, jvp=copy_jvp(_interpolate), aliases=("upsample",)),
    structural("upsample_nearest", _upsampled("nearest", None), "F.upsample_nearest(x, size or "
               "scale_factor)", UPSAMPLE, decompose=_upsample("nearest", None)),
    structural("upsample_bilinear", _upsampled("bilinear", True), "F.upsample_bilinear(x, size or "
               "scale_factor) (align_corners=True)", UPSAMPLE,
               decompose=_upsample("bilinear", True)),
    *[structural(f"adaptive_avg_pool{n}d", _adaptive_avg(n), f"{n}-D adaptive average "
                 "pooling to output_size", "input, output_size: sizes",
                 vjp=separable_vjp(_adaptive_avg(n), _adaptive_axis, n),
                 jvp=linear_jvp(_adaptive_avg(n))) for n in (1, 2, 3)],
    *[_avg_row(n) for n in (1, 2, 3)],
    *[structural(f"lp_pool{n}d", _lp(n), f"{n}-D power-average pooling (sum of x**p over "
                 "each window) ** (1/p)", "input, norm_type: float, kernel_size: ints, "
                 "stride: ints = None, ceil_mode: bool = False", decompose=_lp_pool(n))
      for n in (1, 2, 3)],
    _max_row("max_pool3d", _max3d, 3, "3-D max pooling (ties: the element torch picks)", MAX3D,
             "MaxPool3DWithIndicesBackward"),
    *[_max_row(f"adaptive_max_pool{n}d", _adaptive_max(n), n, f"{n}-D adaptive max "
               "pooling", "input, output_size: sizes, return_indices: bool = False",
               f"AdaptiveMaxPool{n}DBackward") for n in (1, 2, 3)],
]

# The family `gradscope ops` lists these rows under (expr/ops/__init__.py reads it).
BY_FAMILY = {"convolution and pooling": ROWS}
