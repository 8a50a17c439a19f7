"""Convolution and max pooling (1-D and 2-D; average pooling is separable: `resample`).
Adjoints go through im2col: the input's windows laid out as columns (`F.unfold`), so a
convolution is a matrix product whose adjoints are matrix products and `F.fold` (col2im), and
max pooling picks the first largest element of each window, the element torch's kernel picks
(with ceil_mode, whose windows run past the input, the element torch's forward picked). That
is a different computation from torch's own convolution and pooling backward kernels, which is
the point of a reference."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from gradscope.expr.ops.base import KINK, SATURATES, Tensor, structural
from gradscope.expr.ops.conv_nd import conv_jvp
from gradscope.expr.ops.resample import index_branch, index_jvp, index_vjp, with_indices


def _pair(v: Any, one_d: bool, height: int = 1) -> tuple[int, int]:
    """A 1-D or 2-D size as (H, W); a 1-D signal has height 1 (padding 0 there)."""
    if isinstance(v, tuple):
        return (height, v[0]) if one_d else (v[0], v[-1])
    return (height, v) if one_d else (v, v)


def _as_2d(x: Tensor, one_d: bool, batched_ndim: int) -> tuple[Tensor, bool]:
    """x as (N, C, H, W): a missing batch dim added, a 1-D signal given H = 1."""
    unbatched = x.ndim == batched_ndim - 1
    if unbatched:
        x = x.unsqueeze(0)
    return (x.unsqueeze(2) if one_d else x), unbatched


def _geometry(x4: Tensor, kernel: tuple[int, int], p: dict, one_d: bool) -> dict[str, Any]:
    padding = p.get("padding", 0)
    stride = p.get("stride") or kernel if p.get("pool") else p.get("stride", 1)
    dilation = _pair(p.get("dilation", 1), one_d)
    if padding == "valid":
        padding = 0
    if padding == "same":
        total = [d * (k - 1) for d, k in zip(dilation, kernel, strict=True)]
        pads = [(t // 2, t - t // 2) for t in total]
        return {"same": pads, "kernel_size": kernel, "dilation": dilation, "stride": (1, 1)}
    pad = _pair(padding, one_d, height=0)
    return {"padding": pad, "kernel_size": kernel, "dilation": dilation,
            "stride": _pair(stride, one_d)}


def _columns(x4: Tensor, geo: dict[str, Any], fill: float = 0.0) -> tuple[Tensor, Tensor]:
    """(windows (N, C*kh*kw, L), the padded input) for the geometry."""
    if "same" in geo:
        (t, b), (left, right) = geo["same"]
        padded = F.pad(x4, (left, right, t, b), value=fill)
    else:
        ph, pw = geo["padding"]
        padded = F.pad(x4, (pw, pw, ph, ph), value=fill)
    cols = F.unfold(padded, geo["kernel_size"], dilation=geo["dilation"], stride=geo["stride"])
    return cols, padded


def _uncolumns(cols: Tensor, x4: Tensor, padded: Tensor, geo: dict[str, Any]) -> Tensor:
    """col2im: window columns summed back into the input's positions, padding cut off."""
    full = F.fold(cols, padded.shape[-2:], geo["kernel_size"], dilation=geo["dilation"],
                  stride=geo["stride"])
    if "same" in geo:
        (t, _), (left, _) = geo["same"]
    else:
        t, left = geo["padding"]
    return full[..., t:t + x4.shape[-2], left:left + x4.shape[-1]]


def _conv_vjp(one_d: bool) -> Callable[..., list[Tensor | None]]:
    def vjp(g: Tensor, out: Tensor, args: Sequence[Tensor | None], p: dict) -> list:
        x, w, bias = args
        x4, unbatched = _as_2d(x, one_d, 3 if one_d else 4)
        w4 = w.unsqueeze(2) if one_d else w
        g4 = (g.unsqueeze(0) if unbatched else g)
        g4 = g4.unsqueeze(2) if one_d else g4
        geo = _geometry(x4, tuple(w4.shape[-2:]), p, one_d)
        cols, padded = _columns(x4, geo)
        groups, n = p.get("groups", 1), x4.shape[0]
        o, ck = w4.shape[0], w4[0].numel()
        cols = cols.reshape(n, groups, ck, -1)  # (N, G, C/G*kh*kw, L)
        gm = g4.reshape(n, groups, o // groups, -1)  # (N, G, O/G, L)
        wm = w4.reshape(groups, o // groups, ck)
        gw = torch.einsum("ngol,ngkl->gok", gm, cols).reshape(w4.shape)
        gcols = torch.einsum("gok,ngol->ngkl", wm, gm).reshape(n, groups * ck, -1)
        gx = _uncolumns(gcols, x4, padded, geo)
        gx = gx.squeeze(2) if one_d else gx
        gb = None if bias is None else g4.sum(dim=(0, 2, 3))
        return [gx.squeeze(0) if unbatched else gx, gw.squeeze(2) if one_d else gw, gb]
    return vjp


def _conv1d(x: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
            padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    return F.conv1d(x, weight, bias, stride, padding, dilation, groups)


def _conv2d(x: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
            padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    return F.conv2d(x, weight, bias, stride, padding, dilation, groups)


def _pool_geo(x: Tensor, p: dict, one_d: bool) -> tuple[Tensor, bool, dict[str, Any]]:
    x4, unbatched = _as_2d(x, one_d, 3 if one_d else 4)
    kernel = _pair(p["kernel_size"], one_d)
    stride = p.get("stride") or p["kernel_size"]  # torch: the window's size by default
    geo = _geometry(x4, kernel, {**p, "pool": True, "stride": stride}, one_d)
    return x4, unbatched, geo


def _pool_back(gcols: Tensor, x4: Tensor, padded: Tensor, geo: dict, unbatched: bool,
               one_d: bool) -> Tensor:
    gx = _uncolumns(gcols, x4, padded, geo)
    gx = gx.squeeze(2) if one_d else gx
    return gx.squeeze(0) if unbatched else gx


def _windows_argmax(x: Tensor, p: dict, one_d: bool) -> tuple[Tensor, ...]:
    """Per window the position of its first largest element (torch's pick), with what
    _pool_back needs."""
    x4, unbatched, geo = _pool_geo(x, p, one_d)
    cols, padded = _columns(x4, geo, fill=float("-inf"))
    n, c = x4.shape[:2]
    windows = cols.reshape(n, c, -1, cols.shape[-1])
    return windows.argmax(2), windows, x4, padded, geo, unbatched


def _max_vjp(one_d: bool) -> Callable[..., list[Tensor]]:
    def vjp(g: Tensor, out: Tensor, args: Sequence[Tensor], p: dict) -> list[Tensor]:
        first, windows, x4, padded, geo, unbatched = _windows_argmax(args[0], p, one_d)
        n, c, k, length = windows.shape
        g4 = (g.unsqueeze(0) if unbatched else g).reshape(n, c, 1, length)
        gcols = torch.zeros_like(windows).scatter(2, first.unsqueeze(2), g4)
        return [_pool_back(gcols.reshape(n, c * k, length), x4, padded, geo, unbatched,
                           one_d)]
    return vjp


def _max_jvp(one_d: bool) -> Callable[..., Tensor]:
    def jvp(ts: Sequence[Tensor], out: Tensor, args: Sequence[Tensor], p: dict) -> Tensor:
        first, windows, _, _, geo, _ = _windows_argmax(args[0], p, one_d)
        t4, _ = _as_2d(ts[0].expand_as(args[0]), one_d, 3 if one_d else 4)
        tcols, _ = _columns(t4, geo)
        n, c, k, length = windows.shape
        picked = tcols.reshape(n, c, k, length).gather(2, first.unsqueeze(2))
        return picked.reshape(out.shape)
    return jvp


def _max_branch(one_d: bool) -> Callable[..., Tensor]:
    def branch(x: Tensor, **p: Any) -> Tensor:  # a tie or a new winner is a kink
        return _windows_argmax(x, p, one_d)[0]
    return branch


CONV = ("input, weight, bias?, stride: ints = 1, padding: padding = 0, dilation: ints = 1, "
        "groups: int = 1")
MAX = ("input, kernel_size: ints, stride: ints = None, padding: ints = 0, dilation: ints = 1, "
       "ceil_mode: bool = False, return_indices: bool = False")
POOL_HINT = "max pooling passes the gradient only to the largest element of each window"


def _max1d(x: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
           dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Tensor:
    return F.max_pool1d(x, kernel_size, stride, padding, dilation, ceil_mode)


def _max2d(x: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
           dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Tensor:
    return F.max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode)


def _ceil_mode_by_indices(fn: Callable[..., Any], n: int) -> dict[str, Any]:
    """With ceil_mode the last windows run past the input, which im2col cannot lay out: the
    adjoint then sends each value back to the element torch's forward picked."""
    picked = with_indices(fn)

    def either(by_columns: Callable[..., Any], by_indices: Callable[..., Any]) -> Any:
        return lambda *a: (by_indices if a[-1].get("ceil_mode") else by_columns)(*a)

    one_d = n == 1
    return {"vjp": either(_max_vjp(one_d), index_vjp(picked, n)),
            "jvp": either(_max_jvp(one_d), index_jvp(picked, n)),
            "branch": lambda x, **p: (index_branch(picked) if p.get("ceil_mode")
                                      else _max_branch(one_d))(x, **p)}


ROWS = [
    structural("conv1d", _conv1d, "1-D convolution (stride, padding, dilation, groups)", CONV,
         vjp=_conv_vjp(True), jvp=conv_jvp(_conv1d, 1)),
    structural("conv2d", _conv2d, "2-D convolution (stride, padding, dilation, groups)", CONV,
         vjp=_conv_vjp(False), jvp=conv_jvp(_conv2d, 2)),
    structural("max_pool1d", _max1d, "1-D max pooling (ties: the first largest, as torch)", MAX,
               **_ceil_mode_by_indices(F.max_pool1d, 1), kink=KINK, flow=SATURATES,
               grad_fns=("MaxPool1DWithIndicesBackward",), hint=POOL_HINT,
               values_when=("return_indices",)),
    structural("max_pool2d", _max2d, "2-D max pooling (ties: the first largest, as torch)", MAX,
               **_ceil_mode_by_indices(F.max_pool2d, 2), kink=KINK, flow=SATURATES,
               grad_fns=("MaxPool2DWithIndicesBackward",), hint=POOL_HINT,
               values_when=("return_indices",)),
]

# The family `gradscope ops` lists these rows under (expr/ops/__init__.py reads it).
BY_FAMILY = {"convolution and pooling": ROWS}
