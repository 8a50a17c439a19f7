"""conv3d and the transposed convolutions (1-3 dims), with adjoints written with torch's
*forward* convolutions: a convolution's adjoint in its input is the transposed convolution
with the same weight (and the other way round), and its adjoint in the weight correlates the
input with the upstream — a convolution of the two with stride and dilation swapped, one group
at a time. Padding ('same' too) is applied explicitly first, so every step pads nothing."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from gradscope.expr.ops.base import Op, Tensor, structural

CONV = (F.conv1d, F.conv2d, F.conv3d)
TRANSPOSED = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)


def _each(value: Any, n: int) -> tuple[int, ...]:
    return tuple(value) if isinstance(value, tuple | list) else (value,) * n


def _pads(padding: Any, kernel: Sequence[int], dilation: Sequence[int], n: int
          ) -> list[tuple[int, int]]:
    """(before, after) per spatial dim, torch's 'same' split included (the odd one after)."""
    if padding == "valid":
        return [(0, 0)] * n
    if padding == "same":
        totals = [d * (k - 1) for d, k in zip(dilation, kernel, strict=True)]
        return [(t // 2, t - t // 2) for t in totals]
    return [(q, q) for q in _each(padding, n)]


def _padded(x: Tensor, pads: list[tuple[int, int]]) -> Tensor:
    flat = [q for pair in reversed(pads) for q in pair]  # F.pad: the last dim first
    return F.pad(x, flat) if any(flat) else x


def _cropped(t: Tensor, pads: list[tuple[int, int]], shape: Sequence[int]) -> Tensor:
    n = len(pads)
    index = tuple(slice(before, before + size) for (before, _), size in
                  zip(pads, shape[-n:], strict=True))
    return t[(Ellipsis, *index)]


def weight_grad(inp: Tensor, up: Tensor, kernel: Sequence[int], stride: Sequence[int],
                dilation: Sequence[int], groups: int) -> Tensor:
    """d<up, conv(inp, w)>/dw for an input already padded: inp's channels as the batch
    convolved with up's channels as the weight, stride and dilation swapped — every group in
    one grouped convolution (a Python loop over 100,000 depthwise groups ran for minutes)."""
    n = len(kernel)
    batch, spatial = inp.shape[0], inp.shape[2:]
    ci, co = inp.shape[1] // groups, up.shape[1] // groups
    # (ci, G·N, *L): group g's input channels as the batch, its samples as channels
    x = inp.reshape(batch, groups, ci, *spatial).movedim(2, 0).movedim(2, 1)
    x = x.reshape(ci, groups * batch, *spatial)
    # (G·co, N, *L'): group g's upstream channels as output channels over its samples
    u = up.reshape(batch, groups, co, *up.shape[2:]).movedim(0, 2)
    u = u.reshape(groups * co, batch, *up.shape[2:])
    full = CONV[n - 1](x, u, None, dilation, 0, stride, groups).transpose(0, 1)
    return full[(Ellipsis, *[slice(0, k) for k in kernel])].contiguous()


def _batched(x: Tensor, n: int) -> tuple[Tensor, bool]:
    return (x.unsqueeze(0), True) if x.ndim == n + 1 else (x, False)


def _geometry(args: Sequence[Any], g: Tensor, p: dict, n: int) -> dict[str, Any]:
    """The call's input and upstream batched, and its kernel, stride, dilation, groups and
    explicit padding."""
    x, w, _ = args
    xb, unbatched = _batched(x, n)
    kernel, dilation = w.shape[2:], _each(p.get("dilation", 1), n)
    return {"x": xb, "g": g.unsqueeze(0) if unbatched else g, "unbatched": unbatched,
            "kernel": kernel, "stride": _each(p.get("stride", 1), n), "dilation": dilation,
            "groups": p.get("groups", 1), "pads": _pads(p.get("padding", 0), kernel, dilation,
                                                        n)}


def _finished(geo: dict[str, Any], gx: Tensor, gw: Tensor, bias: Tensor | None) -> list:
    gb = geo["g"]
    gbias = None if bias is None else gb.sum(dim=(0, *range(2, gb.ndim)))
    return [gx.squeeze(0) if geo["unbatched"] else gx, gw, gbias]


def _conv_vjp(n: int) -> Callable[..., list[Tensor | None]]:
    def vjp(g: Tensor, out: Tensor, args: Sequence[Any], p: dict) -> list:
        geo = _geometry(args, g, p, n)
        gb, kernel, stride, dilation = geo["g"], geo["kernel"], geo["stride"], geo["dilation"]
        xp = _padded(geo["x"], geo["pads"])
        extra = [xp.shape[2 + i] - ((gb.shape[2 + i] - 1) * stride[i]
                                    + dilation[i] * (kernel[i] - 1) + 1) for i in range(n)]
        gxp = TRANSPOSED[n - 1](gb, args[1], None, stride, 0, tuple(extra), geo["groups"],
                                dilation)
        gw = weight_grad(xp, gb, kernel, stride, dilation, geo["groups"])
        return _finished(geo, _cropped(gxp, geo["pads"], geo["x"].shape), gw, args[2])
    return vjp


def _transposed_vjp(n: int) -> Callable[..., list[Tensor | None]]:
    """conv_transpose is conv's adjoint: its own adjoint in x is conv with the same weight,
    and in w the weight gradient of conv(g, w) against x."""
    def vjp(g: Tensor, out: Tensor, args: Sequence[Any], p: dict) -> list:
        geo = _geometry(args, g, p, n)
        gp = _padded(geo["g"], geo["pads"])
        gx = CONV[n - 1](gp, args[1], None, geo["stride"], 0, geo["dilation"], geo["groups"])
        gx = gx[(Ellipsis, *[slice(0, s) for s in geo["x"].shape[2:]])]
        gw = weight_grad(gp, geo["x"], geo["kernel"], geo["stride"], geo["dilation"],
                         geo["groups"])
        return _finished(geo, gx, gw, args[2])
    return vjp


def conv_jvp(fn: Callable[..., Tensor], n: int) -> Callable[..., Tensor]:
    """The tangent of a convolution (bilinear in input and weight, plus the bias)."""
    def jvp(ts: Sequence[Any], out: Tensor, args: Sequence[Any], p: dict) -> Tensor:
        x, w, bias = args
        tx, tw, tb = ts
        total = torch.zeros_like(out)
        if tx is not None:
            total = total + fn(tx.expand_as(x), w, None, **p)
        if tw is not None:
            total = total + fn(x, tw.expand_as(w), None, **p)
        if bias is not None and tb is not None:
            shape = [1] * out.ndim
            shape[0 if x.ndim == n + 1 else 1] = -1  # the channel dim
            total = total + tb.expand_as(bias).reshape(shape)
        return total
    return jvp


def _conv3d(x: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
            padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    return F.conv3d(x, weight, bias, stride, padding, dilation, groups)


def _transposed(n: int) -> Callable[..., Tensor]:
    fn = TRANSPOSED[n - 1]

    def run(x: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
            padding: Any = 0, output_padding: Any = 0, groups: int = 1,
            dilation: Any = 1) -> Tensor:
        return fn(x, weight, bias, stride, padding, output_padding, groups, dilation)
    return run


CONV_SIG = ("input, weight, bias?, stride: ints = 1, padding: padding = 0, dilation: ints = 1, "
            "groups: int = 1")
TRANSPOSED_SIG = ("input, weight, bias?, stride: ints = 1, padding: ints = 0, "
                  "output_padding: ints = 0, groups: int = 1, dilation: ints = 1")


def _transposed_row(n: int) -> Op:
    fn = _transposed(n)
    return structural(f"conv_transpose{n}d", fn, f"{n}-D transposed convolution (stride, "
                      "padding, output_padding, groups, dilation)", TRANSPOSED_SIG,
                      vjp=_transposed_vjp(n), jvp=conv_jvp(fn, n))


ROWS = [
    structural("conv3d", _conv3d, "3-D convolution (stride, padding incl. 'same', "
               "dilation, groups)", CONV_SIG, vjp=_conv_vjp(3), jvp=conv_jvp(_conv3d, 3)),
    *[_transposed_row(n) for n in (1, 2, 3)],
]

# The family `gradscope ops` lists these rows under (expr/ops/__init__.py reads it).
BY_FAMILY = {"convolution and pooling": ROWS}
