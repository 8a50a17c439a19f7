"""Functions torch has as one call that are compositions of other rows: log_softmax, softmin,
normalize, layer_norm, cosine_similarity and the losses. Torch runs its own implementation
(that is what autograd checks); the symbolic engine differentiates the composition written
here with the table's other rows (`decompose`), so the symbolic column is an independent
derivation. nll_loss is a row of its own with a closed-form adjoint (a scatter)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from gradscope.expr import ir
from gradscope.expr.ops.base import KINK, STRUCTURAL, Build, Op, Tensor, signature, structural
from gradscope.expr.ops.base import given as _given

REDUCTION = {"reduction": ("none", "mean", "sum")}
KL_REDUCTION = {"reduction": ("none", "mean", "sum", "batchmean")}


def _dim(dim: int | None) -> int:
    return -1 if dim is None else dim


def _log_softmax(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
                  names: Sequence[str] = ()) -> ir.Node:
    (x,) = args
    return b("sub", x, b("logsumexp", x, dim=_dim(p.get("dim")), keepdim=True))


def _softmin(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
                  names: Sequence[str] = ()) -> ir.Node:
    return b("softmax", b("neg", args[0]), dim=p.get("dim"))


def _normalize(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
                  names: Sequence[str] = ()) -> ir.Node:
    (x,) = args
    size = b("norm", x, p=p["p"], dim=p["dim"], keepdim=True)
    return b("div", x, b("clamp", size, p["eps"], math.inf))


def _layer_norm(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
                names: Sequence[str] = ()) -> ir.Node:
    given = _given(args, names)
    x = given["input"]
    dims = tuple(range(-len(p["normalized_shape"]), 0))
    centred = b("sub", x, b("mean", x, dim=dims, keepdim=True))
    spread = b("var", x, dim=dims, correction=0.0, keepdim=True)
    y = b("div", centred, b("sqrt", b("add", spread, p["eps"])))
    if "weight" in given:
        y = b("mul", y, given["weight"])
    if "bias" in given:
        y = b("add", y, given["bias"])
    return y


def _cosine(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
                  names: Sequence[str] = ()) -> ir.Node:
    x1, x2 = args
    d = p["dim"]
    unit1 = b("div", x1, b("norm", x1, dim=d, keepdim=True))
    unit2 = b("div", x2, b("norm", x2, dim=d, keepdim=True))
    return b("sum", b("mul", unit1, unit2), dim=d)


def _pointwise_loss(kind: str):
    def decompose(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
                  names: Sequence[str] = ()) -> ir.Node:
        x, t = args
        d = b("sub", x, t)
        if kind == "mse":
            per = b("pow", d, 2)
        elif kind == "l1" or (kind == "smooth_l1" and p["beta"] == 0):
            per = b("abs", d)
        elif kind == "smooth_l1":
            beta = p["beta"]
            per = b("where", b("lt", b("abs", d), beta),
                    b("div", b("mul", 0.5, b("pow", d, 2)), beta),
                    b("sub", b("abs", d), 0.5 * beta))
        elif kind == "huber":
            delta = p["delta"]
            per = b("where", b("lt", b("abs", d), delta), b("mul", 0.5, b("pow", d, 2)),
                    b("mul", delta, b("sub", b("abs", d), 0.5 * delta)))
        elif kind == "bce":
            per = b("neg", b("add", b("mul", t, b("log", x)),
                             b("mul", b("sub", 1, t), b("log", b("sub", 1, x)))))
        else:  # bce with logits: softplus(x) - t x, the stable form
            per = b("sub", b("softplus", x), b("mul", t, x))
        return b.reduce(per, p["reduction"])
    return decompose


def _kl_div(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
                  names: Sequence[str] = ()) -> ir.Node:
    x, t = args
    if p["log_target"]:
        per = b("mul", b("exp", t), b("sub", t, x))
    else:
        per = b("sub", b("xlogy", t, t), b("mul", t, x))
    if p["reduction"] == "batchmean":
        batch = metas[0].shape[0] if metas[0].ndim else 1
        return b("div", b("sum", per), batch)
    return b.reduce(per, p["reduction"])


def _cross_entropy(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
                   names: Sequence[str] = ()) -> ir.Node:
    x, t = args
    d = 1 if metas[0].ndim >= 2 else 0
    logp = b("log_softmax", x, dim=d)
    if metas[1].is_floating_point():  # class probabilities
        return b.reduce(b("neg", b("sum", b("mul", t, logp), dim=d)), p["reduction"])
    return b("nll_loss", logp, t, ignore_index=p["ignore_index"], reduction=p["reduction"])


def _nll_parts(x: Tensor, t: Tensor, ignore: int) -> tuple[Tensor, Tensor, Tensor, int]:
    """The class dim, targets made safe to index with, the valid mask, and x's class dim."""
    d = 1 if x.ndim >= 2 else 0
    valid = t != ignore
    safe = torch.where(valid, t, torch.zeros_like(t))
    return safe.unsqueeze(d), valid, d, x.shape[d]


def _nll_vjp(g: Tensor, out: Tensor, args: Sequence[Tensor], p: dict) -> list[Tensor]:
    x, t = args
    index, valid, d, _ = _nll_parts(x, t, p["ignore_index"])
    per = valid.to(x.dtype) * g  # g: one number (mean, sum) or one per sample (none)
    if p["reduction"] == "mean":
        per = per / valid.sum().clamp(min=1)
    grad = torch.zeros_like(x).scatter(d, index, -per.unsqueeze(d))
    return [grad, None]


def _nll_jvp(ts: Sequence[Tensor], out: Tensor, args: Sequence[Tensor], p: dict) -> Tensor:
    x, t = args
    return F.nll_loss(ts[0].expand_as(x), t, ignore_index=p["ignore_index"],
                      reduction=p["reduction"])


def _layer_norm_fn(x: Tensor, weight: Tensor | None, bias: Tensor | None,
                   normalized_shape: tuple[int, ...], eps: float = 1e-5) -> Tensor:
    return F.layer_norm(x, normalized_shape, weight, bias, eps)


def _row(name: str, fn: Any, summary: str, sig: str, decompose: Any, **kw: Any) -> Op:
    return structural(name, fn, summary, sig, decompose=decompose, **kw)


def _loss(name: str, fn: Any, summary: str, kind: str, extra: str = "", **kw: Any) -> Op:
    sig = f"input, target, {extra + ', ' if extra else ''}reduction: str = 'mean'"
    return _row(name, fn, summary, sig, _pointwise_loss(kind), choices=REDUCTION, **kw)


ROWS = [
    _row("log_softmax", lambda x, dim=None: F.log_softmax(x, _dim(dim)),
         "log(softmax(x, dim)) (dim defaults to -1)", "input, dim: dim = None", _log_softmax),
    _row("softmin", lambda x, dim=None: F.softmin(x, _dim(dim)),
         "softmax(-x, dim) (dim defaults to -1)", "input, dim: dim = None", _softmin),
    _row("normalize", F.normalize, "x / max(norm(x, p, dim), eps)",
         "input, p: float = 2.0, dim: dim = 1, eps: float = 1e-12", _normalize),
    _row("layer_norm", _layer_norm_fn,
         "layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5)",
         "input, normalized_shape: shape, weight?, bias?, eps: float = 1e-05", _layer_norm),
    _row("cosine_similarity", F.cosine_similarity, "cosine of the angle along dim",
         "x1, x2, dim: dim = 1, eps: float = 1e-08", _cosine),
    _loss("mse_loss", F.mse_loss, "mean squared error", "mse"),
    _loss("l1_loss", F.l1_loss, "mean absolute error (kink where input == target)", "l1",
          branch=lambda x, t, **p: torch.sign(x - t), kink=KINK),
    _loss("smooth_l1_loss", F.smooth_l1_loss, "quadratic below beta, linear above",
          "smooth_l1", "beta: float = 1.0",
          branch=lambda x, t, **p: torch.sign(x - t) if p.get("beta", 1.0) == 0
          else torch.zeros_like(x - t), kink=KINK),
    _loss("huber_loss", F.huber_loss, "quadratic below delta, linear above", "huber",
          "delta: float = 1.0"),
    _loss("binary_cross_entropy", F.binary_cross_entropy,
          "-(t log x + (1 - t) log(1 - x)), 0 < x < 1", "bce", domain=(0.05, 0.95)),
    _loss("binary_cross_entropy_with_logits", F.binary_cross_entropy_with_logits,
          "binary cross entropy of sigmoid(x), computed stably", "bce_logits"),
    _row("kl_div", F.kl_div, "KL divergence, input log-probabilities (log_target: target too)",
         "input, target, reduction: str = 'mean', log_target: bool = False", _kl_div,
         choices=KL_REDUCTION),
    _row("cross_entropy", F.cross_entropy,
         "cross entropy of logits; target class indices (--const) or probabilities",
         "input, target, ignore_index: int = -100, reduction: str = 'mean'", _cross_entropy,
         choices=REDUCTION, integer_args=("target",)),
    Op("nll_loss", STRUCTURAL, (2, 2), F.nll_loss,
       "negative log likelihood of log-probabilities at class indices (--const)",
       signature=signature("input, target, ignore_index: int = -100, reduction: str = 'mean'",
                           **REDUCTION),
       vjp=_nll_vjp, jvp=_nll_jvp, integer_args=("target",), integers_only=("target",)),
]

# The family `gradscope ops` lists these rows under (expr/ops/__init__.py reads it).
BY_FAMILY = {"normalisation and loss": ROWS}
