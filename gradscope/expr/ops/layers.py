"""Layers as functions, written with other rows for the symbolic engine (`decompose`) while
torch runs its own: batch_norm (training or running statistics), instance_norm, group_norm,
rms_norm, local_response_norm, scaled_dot_product_attention (masks, causal, scale), and
F.one_hot (data: it has no gradient). Torch's running statistics are never updated by a check:
its functions get copies."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from gradscope.errors import UsageError
from gradscope.expr import ir
from gradscope.expr.ops.base import Build, Tensor, structural
from gradscope.expr.ops.base import decomposed as _row
from gradscope.expr.ops.base import given as _given


def _per_channel(b: Build, node: ir.Node, ndim: int) -> ir.Node:
    """A (C,) parameter shaped to broadcast over (N, C, ...)."""
    return b("reshape", node, shape=(-1, *[1] * (ndim - 2)))


def _normalised(b: Build, x: ir.Node, dims: tuple[int, ...], eps: float) -> ir.Node:
    centred = b("sub", x, b("mean", x, dim=dims, keepdim=True))
    spread = b("var", x, dim=dims, correction=0.0, keepdim=True)
    return b("div", centred, b("sqrt", b("add", spread, eps)))


def _affine(b: Build, y: ir.Node, given: dict[str, ir.Node], ndim: int) -> ir.Node:
    if "weight" in given:
        y = b("mul", y, _per_channel(b, given["weight"], ndim))
    if "bias" in given:
        y = b("add", y, _per_channel(b, given["bias"], ndim))
    return y


def _by_running(b: Build, x: ir.Node, given: dict[str, ir.Node], ndim: int,
                eps: float) -> ir.Node:
    mean = _per_channel(b, given["running_mean"], ndim)
    var = _per_channel(b, given["running_var"], ndim)
    return b("div", b("sub", x, mean), b("sqrt", b("add", var, eps)))


def _batch_norm(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
                names: Sequence[str] = ()) -> ir.Node:
    given, ndim = _given(args, names), metas[0].ndim
    dims = (0, *range(2, ndim))
    if p["training"] or "running_mean" not in given:
        y = _normalised(b, given["input"], dims, p["eps"])
    else:
        y = _by_running(b, given["input"], given, ndim, p["eps"])
    return _affine(b, y, given, ndim)


def _instance_norm(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
                   names: Sequence[str] = ()) -> ir.Node:
    given, ndim = _given(args, names), metas[0].ndim
    if p["use_input_stats"] or "running_mean" not in given:
        y = _normalised(b, given["input"], tuple(range(2, ndim)), p["eps"])
    else:
        y = _by_running(b, given["input"], given, ndim, p["eps"])
    return _affine(b, y, given, ndim)


def _group_norm(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
                names: Sequence[str] = ()) -> ir.Node:
    given, shape = _given(args, names), tuple(metas[0].shape)
    grouped = b("reshape", given["input"], shape=(shape[0], p["num_groups"], -1))
    y = b("reshape", _normalised(b, grouped, (-1,), p["eps"]), shape=shape)
    return _affine(b, y, given, len(shape))


def _rms_norm(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
              names: Sequence[str] = ()) -> ir.Node:
    given = _given(args, names)
    x = given["input"]
    dims = tuple(range(-len(p["normalized_shape"]), 0))
    eps = p["eps"] if p["eps"] is not None else torch.finfo(metas[0].dtype).eps
    y = b("mul", x, b("rsqrt", b("add", b("mean", b("mul", x, x), dim=dims, keepdim=True),
                                 eps)))
    return b("mul", y, given["weight"]) if "weight" in given else y


def _local_response_norm(b: Build, args: Sequence[ir.Node], p: dict,
                         metas: Sequence[Tensor], names: Sequence[str] = ()) -> ir.Node:
    """torch's own composition: the squares averaged over `size` neighbouring channels."""
    (x,), shape, size = args, tuple(metas[0].shape), p["size"]
    square = b("mul", x, x)
    pads = (size // 2, (size - 1) // 2)
    if len(shape) == 3:
        padded = b("pad", b("unsqueeze", square, dim=1), pad=(0, 0, *pads))
        div = b("squeeze", b("avg_pool2d", padded, kernel_size=(size, 1), stride=1), dim=1)
    else:
        five = b("reshape", square, shape=(shape[0], 1, shape[1], shape[2], -1))
        padded = b("pad", five, pad=(0, 0, 0, 0, *pads))
        pooled = b("avg_pool3d", padded, kernel_size=(size, 1, 1), stride=1)
        div = b("reshape", b("squeeze", pooled, dim=1), shape=shape)
    div = b("pow", b("add", b("mul", div, p["alpha"]), p["k"]), p["beta"])
    return b("div", x, div)


def _attention(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
               names: Sequence[str] = ()) -> ir.Node:
    """softmax(q kᵀ · scale + mask) v, the mask a bool (False: left out) or added; causal
    keeps the lower triangle."""
    given = _given(args, names)
    q, k, v = given["query"], given["key"], given["value"]
    lq, lk, d = metas[0].shape[-2], metas[1].shape[-2], metas[0].shape[-1]
    scale = p["scale"] if p["scale"] is not None else 1 / math.sqrt(d)
    scores = b("mul", b("matmul", q, b("transpose", k, dim0=-2, dim1=-1)), scale)
    if "attn_mask" in given:
        mask = given["attn_mask"]
        if len(metas) > 3 and metas[3].dtype == torch.bool:
            scores = b("masked_where", mask, scores, -math.inf)
        else:
            scores = b("add", scores, mask)
    if p["is_causal"]:
        scores = b("add", scores, b("tril_bias", scores, rows=lq, cols=lk))
    return b("matmul", b("softmax", scores, dim=-1), v)


def _tril_bias(x: Tensor, rows: int, cols: int) -> Tensor:
    """0 on and below the diagonal, -inf above (the causal mask as an additive bias)."""
    keep = torch.ones(rows, cols, dtype=torch.bool, device=x.device).tril()
    return torch.zeros(rows, cols, dtype=x.dtype, device=x.device).masked_fill(~keep,
                                                                               -math.inf)


def _no_adjoint(g: Tensor, out: Tensor, args: Sequence[Any], p: dict) -> list[None]:
    return [None] * len(args)


def _buffers(*stats: Tensor | None) -> list[Tensor | None]:
    """Copies of the running statistics (torch updates them in place when training); they are
    buffers torch cannot differentiate: data, never inputs."""
    if any(t is not None and t.requires_grad for t in stats):
        raise UsageError("running_mean and running_var are buffers torch does not "
                         "differentiate: give them as data with --const NAME=VALUE")
    return [None if t is None else t.clone() for t in stats]


def _batch_norm_fn(x: Tensor, running_mean: Tensor | None = None,
                   running_var: Tensor | None = None, weight: Tensor | None = None,
                   bias: Tensor | None = None, training: bool = False, momentum: float = 0.1,
                   eps: float = 1e-5) -> Tensor:
    copies = _buffers(running_mean, running_var)
    return F.batch_norm(x, *copies, weight, bias, training, momentum, eps)


def _instance_norm_fn(x: Tensor, running_mean: Tensor | None = None,
                      running_var: Tensor | None = None, weight: Tensor | None = None,
                      bias: Tensor | None = None, use_input_stats: bool = True,
                      momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    copies = _buffers(running_mean, running_var)
    return F.instance_norm(x, *copies, weight, bias, use_input_stats, momentum, eps)


def _group_norm_fn(x: Tensor, weight: Tensor | None = None, bias: Tensor | None = None,
                   num_groups: int = 1, eps: float = 1e-5) -> Tensor:
    return F.group_norm(x, num_groups, weight, bias, eps)


def _rms_norm_fn(x: Tensor, weight: Tensor | None = None, normalized_shape: Any = (),
                 eps: float | None = None) -> Tensor:
    return F.rms_norm(x, normalized_shape, weight, eps)


def _attention_fn(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = None,
                  dropout_p: float = 0.0, is_causal: bool = False,
                  scale: float | None = None) -> Tensor:
    if dropout_p:
        raise ValueError("dropout_p must be 0 in a gradient check (dropout is random)")
    return F.scaled_dot_product_attention(query, key, value, attn_mask, 0.0, is_causal,
                                          scale=scale)


ONE_HOT_ELEMENTS = 20_000_000  # without num_classes, the data's largest class sets the size


def _one_hot(x: Tensor, num_classes: int = -1) -> Tensor:
    if num_classes < 0 and x.numel():
        if x.is_meta:  # the size is the data's: the real evaluation is bounded below
            raise NotImplementedError("one_hot without num_classes on meta tensors")
        classes = int(x.max()) + 1
        if x.numel() * classes > ONE_HOT_ELEMENTS:
            raise UsageError(f"F.one_hot without num_classes would make {x.numel()} × "
                             f"{classes} elements (its data's largest class is {classes - 1})"
                             f"; give num_classes, or smaller class indices")
    return F.one_hot(x, num_classes)



NORM = ("input, running_mean?, running_var?, weight?, bias?, training: bool = False, "
        "momentum: float = 0.1, eps: float = 1e-05")

ROWS = [
    _row("batch_norm", _batch_norm_fn, "F.batch_norm(x, running_mean, running_var, weight, "
         "bias, training=False, momentum, eps)", NORM, _batch_norm),
    _row("instance_norm", _instance_norm_fn, "F.instance_norm(x, running_mean=None, "
         "running_var=None, weight=None, bias=None, use_input_stats=True, momentum, eps)",
         NORM.replace("training: bool = False", "use_input_stats: bool = True"),
         _instance_norm),
    _row("group_norm", _group_norm_fn, "F.group_norm(x, num_groups, weight=None, bias=None, "
         "eps=1e-05)", "input, num_groups: int, weight?, bias?, eps: float = 1e-05",
         _group_norm),
    _row("rms_norm", _rms_norm_fn, "F.rms_norm(x, normalized_shape, weight=None, eps=None)",
         "input, normalized_shape: shape, weight?, eps: float = None", _rms_norm),
    _row("local_response_norm", F.local_response_norm, "F.local_response_norm(x, size, "
         "alpha=1e-4, beta=0.75, k=1.0)", "input, size: int, alpha: float = 0.0001, "
         "beta: float = 0.75, k: float = 1.0", _local_response_norm),
    _row("scaled_dot_product_attention", _attention_fn, "F.scaled_dot_product_attention(q, "
         "k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None)",
         "query, key, value, attn_mask?, dropout_p: float = 0.0, is_causal: bool = False, "
         "scale: float = None", _attention, integer_args=("attn_mask",)),
    structural("tril_bias", _tril_bias, "the causal mask as a bias: 0 on and below the "
               "diagonal, -inf above", "input, rows: int, cols: int", vjp=_no_adjoint,
               jvp=lambda ts, out, args, p: torch.zeros_like(out), expression=False),
    structural("one_hot", _one_hot, "F.one_hot(t, num_classes=-1) of integer data "
               "(--const): data, no gradient", "input, num_classes: int = -1",
               vjp=_no_adjoint, jvp=lambda ts, out, args, p: torch.zeros_like(out),
               integer_args=("input",), integers_only=("input",)),
]

# The family `gradscope ops` lists these rows under (expr/ops/__init__.py reads it).
BY_FAMILY = {"normalisation and loss": ROWS}
