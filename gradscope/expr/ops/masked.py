"""torch.masked's reductions and normalisations with a mask given as data (`mask=m`,
--const m=...): the masked-out elements replaced by the reduction's identity (0 for sums and
norms, 1 for products, -inf for maxima, logsumexp and softmax, +inf for minima), then the
plain row — written so for the symbolic engine while torch runs torch.masked's own function.
Means, variances and standard deviations count only the elements the mask keeps."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from gradscope.expr import ir
from gradscope.expr.ops.base import Build, Op, Tensor, structural
from gradscope.expr.ops.base import given as _given
from gradscope.expr.ops.indexing import _mask as as_mask

Decompose = Callable[..., ir.Node]
FILL = {"sum": 0.0, "norm": 0.0, "prod": 1.0, "amax": -math.inf, "amin": math.inf,
        "logsumexp": -math.inf, "softmax": -math.inf, "log_softmax": -math.inf,
        "softmin": math.inf, "cumsum": 0.0, "cumprod": 1.0, "normalize": 0.0}
ROW = {"amax": "max", "amin": "min"}


def _fill(name: str, p: dict) -> float:
    """The identity the masked-out elements take, as torch.masked's: +inf for a norm of order
    -inf (the smallest |x|), 0 for every other order (torch's own, a negative finite order
    included)."""
    if name in ("norm", "normalize") and p.get("ord") == -math.inf:
        return math.inf
    return FILL[name]


def _filled(b: Build, given: dict[str, ir.Node], fill: float) -> ir.Node:
    if "mask" not in given:
        return given["input"]
    return b("masked_where", given["mask"], given["input"], fill)


def _dims(p: dict) -> dict[str, Any]:
    out = {k: p[k] for k in ("dim", "keepdim") if k in p}
    if out.get("dim") is not None and not isinstance(out["dim"], tuple):
        out["dim"] = (out["dim"],)
    return out


def _reduced(name: str) -> Decompose:
    def decompose(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
                  names: Sequence[str] = ()) -> ir.Node:
        x = _filled(b, _given(args, names), _fill(name, p))
        q = _dims(p)
        if name == "norm":
            q["p"] = p["ord"] if p["ord"] is not None else 2.0
        if name in ("amax", "amin") and q.get("dim") is None:
            q.pop("dim", None)
        if name == "prod" and q.get("dim") is not None:
            for d in sorted(q.pop("dim"), reverse=True):  # one dim at a time
                x = b("prod", x, dim=d, keepdim=q.get("keepdim", False))
            return x
        return b(ROW.get(name, name), x, **q)
    return decompose


def _count(b: Build, given: dict[str, ir.Node], q: dict) -> ir.Node:
    """How many elements each reduced slice keeps."""
    ones = b("add", b("mul", given["input"], 0.0), 1.0)
    return b("sum", _filled(b, {**given, "input": ones}, 0.0), **q)


def _mean(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
          names: Sequence[str] = ()) -> ir.Node:
    given, q = _given(args, names), _dims(p)
    return b("div", b("sum", _filled(b, given, 0.0), **q), _count(b, given, q))


def _spread(root: bool) -> Decompose:
    def decompose(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
                  names: Sequence[str] = ()) -> ir.Node:
        given, q = _given(args, names), _dims(p)
        kept = {**q, "keepdim": True}
        mean = b("div", b("sum", _filled(b, given, 0.0), **kept), _count(b, given, kept))
        square = b("pow", b("sub", given["input"], mean), 2)
        total = b("sum", _filled(b, {**given, "input": square}, 0.0), **q)
        correction = p["correction"] if p["correction"] is not None else (
            0.0 if p["unbiased"] is False else 1.0)
        var = b("div", total, b("sub", _count(b, given, q), correction))
        return b("sqrt", var) if root else var
    return decompose


def _along(name: str) -> Decompose:
    def decompose(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
                  names: Sequence[str] = ()) -> ir.Node:
        given = _given(args, names)
        x = _filled(b, given, _fill(name, p))
        if name == "normalize":
            size = b("norm", x, p=p["ord"], dim=(p["dim"],), keepdim=True)
            return b("div", x, b("clamp", size, p["eps"], math.inf))
        return b(name, x, dim=p["dim"])
    return decompose


def _torch(name: str) -> Callable[..., Tensor]:
    fn = getattr(torch.masked, name)

    def run(x: Tensor, mask: Tensor | None = None, **p: Any) -> Tensor:
        if mask is not None and mask.dtype != torch.bool:
            mask = as_mask(mask)  # a mask given as whole numbers (floats are refused)
        return fn(x, **p, mask=mask)
    run.__name__ = name
    return run


def _row(name: str, sig: str, decompose: Decompose, summary: str) -> Op:
    return structural(f"masked.{name}", _torch(name), summary, sig + ", mask?",
                      decompose=decompose, integer_args=("mask",))


REDUCE = "input, dim: dims = None, keepdim: bool = False"
SPREAD = ("input, dim: dims = None, unbiased: bool = None, correction: float = None, "
          "keepdim: bool = False")

ROWS = [
    *[_row(n, REDUCE, _reduced(n), f"torch.masked.{n}(x, dim, keepdim=False, mask=m): "
           f"{n} of the elements the mask keeps") for n in ("sum", "prod", "amax", "amin",
                                                            "logsumexp")],
    _row("norm", "input, ord: float = 2.0, dim: dims = None, keepdim: bool = False",
         _reduced("norm"), "torch.masked.norm(x, ord=2, dim, mask=m)"),
    _row("mean", REDUCE, _mean, "torch.masked.mean(x, dim, mask=m): the mean of the elements "
         "the mask keeps"),
    _row("var", SPREAD, _spread(False), "torch.masked.var(x, dim, unbiased, correction, "
         "mask=m)"),
    _row("std", SPREAD, _spread(True), "torch.masked.std(x, dim, unbiased, correction, "
         "mask=m)"),
    *[_row(n, "input, dim: dim", _along(n), f"torch.masked.{n}(x, dim, mask=m)")
      for n in ("softmax", "log_softmax", "softmin", "cumsum", "cumprod")],
    _row("normalize", "input, ord: float, dim: dim, eps: float = 1e-12", _along("normalize"),
         "torch.masked.normalize(x, ord, dim, eps=1e-12, mask=m)"),
]

# The family `gradscope ops` lists these rows under (expr/ops/__init__.py reads it).
BY_FAMILY = {"reduction": ROWS}
