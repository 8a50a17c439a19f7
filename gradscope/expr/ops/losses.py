"""Losses beyond composite.py's, written with other rows for the symbolic engine as torch's own
functional code computes them: soft_margin, multilabel_soft_margin, margin_ranking,
hinge_embedding, cosine_embedding, gaussian_nll, poisson_nll and triplet_margin. Targets that
select a branch (hinge's ±1) are compared with constants, so they are data or inputs alike."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from gradscope.expr import ir
from gradscope.expr import sympy_functions as sf
from gradscope.expr.ops.base import Build, Op, Tensor, elementwise, structural
from gradscope.expr.ops.base import given as _given

Decompose = Callable[..., ir.Node]
REDUCTION = {"reduction": ("none", "mean", "sum")}
EPSILON = 1e-12  # torch's cosine_embedding_loss adds it to each squared magnitude


def _equal(b: Build, t: ir.Node, value: float, then: ir.Node, other: ir.Node | float
           ) -> ir.Node:
    """where(t == value, then, other), written with < and >."""
    return b("where", b("lt", t, value), other, b("where", b("gt", t, value), other, then))


def _soft_margin(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
                 names: Sequence[str] = ()) -> ir.Node:
    x, y = args
    return b.reduce(b("softplus", b("neg", b("mul", y, x))), p["reduction"])


def _multilabel_soft_margin(b: Build, args: Sequence[ir.Node], p: dict,
                            metas: Sequence[Tensor], names: Sequence[str] = ()) -> ir.Node:
    given = _given(args, names, ("input", "target"))
    x, y = given["input"], given["target"]
    loss = b("neg", b("add", b("mul", y, b("logsigmoid", x)),
                      b("mul", b("sub", 1, y), b("logsigmoid", b("neg", x)))))
    if "weight" in given:
        loss = b("mul", loss, given["weight"])
    per = b("div", b("sum", loss, dim=(-1,)), metas[0].shape[-1])
    return b.reduce(per, p["reduction"])


def _margin_ranking(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
                    names: Sequence[str] = ()) -> ir.Node:
    x1, x2, y = args
    gap = b("add", b("mul", b("neg", y), b("sub", x1, x2)), p["margin"])
    return b.reduce(b("clamp", gap, 0.0, math.inf), p["reduction"])


def _hinge_embedding(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
                     names: Sequence[str] = ()) -> ir.Node:
    x, t = args
    clamped = b("clamp", b("sub", p["margin"], x), 0.0, math.inf)
    # torch: the margin term where t != 1, x itself where t != -1
    margin_part = _equal(b, t, 1.0, b.num(0.0), clamped)
    self_part = _equal(b, t, -1.0, b.num(0.0), x)
    return b.reduce(b("add", margin_part, self_part), p["reduction"])


def _cosine_embedding(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
                      names: Sequence[str] = ()) -> ir.Node:
    x1, x2, t = args
    d = -1 if metas[0].ndim else 0
    dot = b("sum", b("mul", x1, x2), dim=(d,))
    sq1 = b("add", b("sum", b("mul", x1, x1), dim=(d,)), EPSILON)
    sq2 = b("add", b("sum", b("mul", x2, x2), dim=(d,)), EPSILON)
    cos = b("div", dot, b("sqrt", b("mul", sq1, sq2)))
    pos = _equal(b, t, 1.0, b("sub", 1, cos), 0.0)
    neg = _equal(b, t, -1.0, b("clamp", b("sub", cos, p["margin"]), 0.0, math.inf), 0.0)
    return b.reduce(b("add", pos, neg), p["reduction"])


def _gaussian_nll(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
                  names: Sequence[str] = ()) -> ir.Node:
    x, t, var = args
    if metas[2].ndim == metas[0].ndim - 1 and metas[0].ndim:  # one variance per sample
        var = b("unsqueeze", var, dim=-1)
    var = b("clamp_min_passing", var, p["eps"])
    loss = b("mul", 0.5, b("add", b("log", var), b("div", b("pow", b("sub", x, t), 2), var)))
    if p["full"]:
        loss = b("add", loss, 0.5 * math.log(2 * math.pi))
    return b.reduce(loss, p["reduction"])


def _poisson_nll(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
                 names: Sequence[str] = ()) -> ir.Node:
    x, t = args
    if p["log_input"]:
        loss = b("sub", b("exp", x), b("mul", t, x))
    else:
        loss = b("sub", x, b("mul", t, b("log", b("add", x, p["eps"]))))
    if p["full"]:  # Stirling's term where the target exceeds 1
        safe = b("clamp", t, 1.0, math.inf)
        stirling = b("add", b("sub", b("xlogy", safe, safe), safe),
                     b("mul", 0.5, b("log", b("mul", 2 * math.pi, safe))))
        loss = b("add", loss, b("where", b("gt", t, 1.0), stirling, 0.0))
    return b.reduce(loss, p["reduction"])


def _triplet(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
             names: Sequence[str] = ()) -> ir.Node:
    a, pos, neg = args
    dist = {"p": p["p"], "eps": p["eps"]}
    to_pos = b("pairwise_distance", a, pos, **dist)
    to_neg = b("pairwise_distance", a, neg, **dist)
    if p["swap"]:
        to_neg = b("minimum", to_neg, b("pairwise_distance", pos, neg, **dist))
    gap = b("add", b("sub", to_pos, to_neg), p["margin"])
    return b.reduce(b("clamp", gap, 0.0, math.inf), p["reduction"])


def _multilabel_fn(x: Tensor, target: Tensor, weight: Tensor | None = None,
                   reduction: str = "mean") -> Tensor:
    return F.multilabel_soft_margin_loss(x, target, weight, reduction=reduction)


def _gaussian_nll_fn(x: Tensor, target: Tensor, var: Tensor, **p: Any) -> Tensor:
    if x.device.type == "meta":  # torch checks var's values (.item()): shapes only here
        shape = torch.broadcast_shapes(x.shape, target.shape)
        return torch.empty(shape if p.get("reduction") == "none" else (), dtype=x.dtype,
                           device="meta")
    return F.gaussian_nll_loss(x, target, var, **p)


def _row(name: str, decompose: Decompose, sig: str, summary: str, **kw: Any) -> Op:
    fn = _gaussian_nll_fn if name == "gaussian_nll_loss" else getattr(F, name)
    return structural(name, fn, summary, sig + ", reduction: str = 'mean'",
                      REDUCTION, decompose=decompose, **kw)


ROWS = [
    _row("soft_margin_loss", _soft_margin, "input, target",
         "mean log(1 + exp(-y x))"),
    structural("multilabel_soft_margin_loss", _multilabel_fn, "per-class logistic loss "
               "averaged over classes", "input, target, weight?, reduction: str = 'mean'",
               REDUCTION, decompose=_multilabel_soft_margin),
    _row("margin_ranking_loss", _margin_ranking, "input1, input2, target, margin: float = 0.0",
         "max(0, -y (x1 - x2) + margin)"),
    _row("hinge_embedding_loss", _hinge_embedding, "input, target, margin: float = 1.0",
         "x where y = 1, max(0, margin - x) where y = -1"),
    _row("cosine_embedding_loss", _cosine_embedding, "input1, input2, target, "
         "margin: float = 0.0", "1 - cos where y = 1, max(0, cos - margin) where y = -1"),
    _row("gaussian_nll_loss", _gaussian_nll, "input, target, var, full: bool = False, "
         "eps: float = 1e-06", "0.5 (log var + (x - t)^2 / var), var clamped to eps"),
    _row("poisson_nll_loss", _poisson_nll, "input, target, log_input: bool = True, "
         "full: bool = False, eps: float = 1e-08", "exp(x) - t x (log_input), "
         "Stirling's term with full"),
    _row("triplet_margin_loss", _triplet, "anchor, positive, negative, margin: float = 1.0, "
         "p: float = 2.0, eps: float = 1e-06, swap: bool = False",
         "max(0, d(a, p) - d(a, n) + margin)"),
    elementwise("clamp_min_passing", sf.clamp_min_passing.torch_impl, sf.clamp_min_passing,
                "max(x, lo) whose gradient passes as if unclamped (torch's no_grad clamp)",
                2, expression=False),
]

# The family `gradscope ops` lists these rows under (expr/ops/__init__.py reads it).
BY_FAMILY = {"normalisation and loss": ROWS}
