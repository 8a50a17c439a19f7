"""Numerical building blocks written with other rows for the symbolic engine (torch runs its
own): diff (n-th differences, prepend/append), the trapezoidal rule (trapezoid, trapz,
cumulative_trapezoid, with x or dx), cov and corrcoef, renorm, inner (0-d operands too) and
x.sum_to_size."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from gradscope.expr import ir
from gradscope.expr.ops.base import Build, Tensor
from gradscope.expr.ops.base import decomposed as _row
from gradscope.expr.ops.base import given as _given


def _steps(b: Build, x: ir.Node, dim: int, size: int) -> tuple[ir.Node, ir.Node]:
    """x without its last element along dim, and without its first."""
    return (b("narrow", x, dim=dim, start=0, length=size - 1),
            b("narrow", x, dim=dim, start=1, length=size - 1))


def _diff(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
          names: Sequence[str] = ()) -> ir.Node:
    given = _given(args, names)
    parts = [given[k] for k in ("prepend", "input", "append") if k in given]
    d = p["dim"] % metas[0].ndim
    x = b("cat", *parts, dim=d) if len(parts) > 1 else parts[0]
    size = sum(m.shape[d] for m in metas)
    for _ in range(p["n"]):
        before, after = _steps(b, x, d, size)
        x, size = b("sub", after, before), size - 1
    return x


def _spacing(b: Build, given: dict[str, ir.Node], metas: Sequence[Tensor], p: dict,
             d: int) -> ir.Node | float:
    """The widths of the intervals along dim: x's differences, or dx."""
    if "x" not in given:
        return p["dx"] if p.get("dx") is not None else 1.0
    x, meta = given["x"], metas[1]
    if meta.ndim == 1:  # one grid for every slice: along dim, broadcast elsewhere
        before, after = _steps(b, x, 0, meta.shape[0])
        shape = [1] * metas[0].ndim
        shape[d] = -1
        return b("reshape", b("sub", after, before), shape=tuple(shape))
    xd = d - (metas[0].ndim - meta.ndim)
    before, after = _steps(b, x, xd, meta.shape[xd])
    return b("sub", after, before)


def _areas(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
           names: Sequence[str]) -> tuple[ir.Node, int]:
    given = _given(args, names, ("y",))
    d = p["dim"] % metas[0].ndim
    before, after = _steps(b, given["y"], d, metas[0].shape[d])
    mean = b("mul", 0.5, b("add", before, after))
    return b("mul", _spacing(b, given, metas, p, d), mean), d


def _trapezoid(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
               names: Sequence[str] = ()) -> ir.Node:
    areas, d = _areas(b, args, p, metas, names)
    return b("sum", areas, dim=(d,))


def _cumulative(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
                names: Sequence[str] = ()) -> ir.Node:
    areas, d = _areas(b, args, p, metas, names)
    return b("cumsum", areas, dim=d)


def _weights(b: Build, given: dict[str, ir.Node]) -> ir.Node | None:
    parts = [given[k] for k in ("fweights", "aweights") if k in given]
    return None if not parts else parts[0] if len(parts) == 1 else b("mul", *parts)


def _cov(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
         names: Sequence[str] = ()) -> ir.Node:
    """torch's cov: the rows are variables; frequency and importance weights per column."""
    given, meta = _given(args, names), metas[0]
    x = given["input"]
    x = b("reshape", x, shape=(1, -1)) if meta.ndim < 2 else x
    n = meta.shape[-1] if meta.ndim else 1
    w, correction = _weights(b, given), p["correction"]
    if w is None:
        centred = b("sub", x, b("mean", x, dim=(1,), keepdim=True))
        c = b("div", b("matmul", centred, b("transpose", centred, dim0=0, dim1=1)),
              n - correction)
    else:
        total = b("sum", w)
        centred = b("sub", x, b("div", b("sum", b("mul", x, w), dim=(1,), keepdim=True),
                                total))
        factor: ir.Node = total
        if correction and "aweights" in given:
            share = b("div", b("sum", b("mul", w, given["aweights"])), total)
            factor = b("sub", total, b("mul", correction, share))
        elif correction:
            factor = b("sub", total, correction)
        weighted = b("transpose", b("mul", centred, w), dim0=0, dim1=1)
        c = b("div", b("matmul", centred, weighted), factor)
    return b("reshape", c, shape=()) if _one_variable(meta) else c


def _one_variable(meta: Tensor) -> bool:
    """torch's cov of one variable is a scalar (a vector, or one row)."""
    return meta.ndim < 2 or meta.shape[0] == 1


def _corrcoef(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
              names: Sequence[str] = ()) -> ir.Node:
    c = _cov(b, args, {"correction": 1}, metas)
    if _one_variable(metas[0]):
        return b("div", c, c)
    spread = b("sqrt", b("diagonal", c))
    c = b("div", c, b("unsqueeze", spread, dim=1))
    c = b("div", c, b("unsqueeze", spread, dim=0))
    return b("clamp", c, -1.0, 1.0)


def _renorm(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
            names: Sequence[str] = ()) -> ir.Node:
    (x,), ndim = args, metas[0].ndim
    others = tuple(k for k in range(ndim) if k != p["dim"] % ndim)
    size = b("norm", x, p=p["p"], dim=others, keepdim=True)
    scale = b("div", p["maxnorm"], b("add", size, 1e-7))  # torch's own 1e-7
    return b("mul", x, b("where", b("gt", size, p["maxnorm"]), scale, 1.0))


def _inner(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
           names: Sequence[str] = ()) -> ir.Node:
    a, c = args
    if metas[0].ndim == 0 or metas[1].ndim == 0:
        return b("mul", a, c)
    return b("tensordot", a, c, dims=((metas[0].ndim - 1,), (metas[1].ndim - 1,)))


def _sum_to_size(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
                 names: Sequence[str] = ()) -> ir.Node:
    (x,), shape, size = args, tuple(metas[0].shape), tuple(p["size"])
    lead = len(shape) - len(size)
    dims = tuple(range(lead)) + tuple(lead + k for k, s in enumerate(size)
                                      if s == 1 and shape[lead + k] != 1)
    return b("reshape", b("sum", x, dim=dims, keepdim=True), shape=size) if dims else x


def _trapezoid_fn(y: Tensor, x: Tensor | None = None, dx: float | None = None,
                  dim: int = -1) -> Tensor:
    if x is not None:
        return torch.trapezoid(y, x, dim=dim)
    return torch.trapezoid(y, dx=1.0 if dx is None else dx, dim=dim)


def _cumulative_fn(y: Tensor, x: Tensor | None = None, dx: float | None = None,
                   dim: int = -1) -> Tensor:
    if x is not None:
        return torch.cumulative_trapezoid(y, x, dim=dim)
    return torch.cumulative_trapezoid(y, dx=1.0 if dx is None else dx, dim=dim)


def _diff_fn(x: Tensor, prepend: Tensor | None = None, append: Tensor | None = None,
             n: int = 1, dim: int = -1) -> Tensor:
    return torch.diff(x, n, dim, prepend, append)


def _cov_fn(x: Tensor, fweights: Tensor | None = None, aweights: Tensor | None = None,
            correction: int = 1) -> Tensor:
    return torch.cov(x, correction=correction, fweights=fweights, aweights=aweights)


def _sum_to_size_fn(x: Tensor, size: Any) -> Tensor:
    return x.sum_to_size(size)



TRAPEZOID = "y, x?, dx: float = None, dim: dim = -1"

ROWS = [
    _row("diff", _diff_fn, "diff(x, n=1, dim=-1, prepend=None, append=None): n-th "
         "differences", "input, n: int = 1, dim: dim = -1, prepend?, append?", _diff),
    _row("trapezoid", _trapezoid_fn, "trapezoid(y, x=None, dx=None, dim=-1): the "
         "trapezoidal rule", TRAPEZOID, _trapezoid, aliases=("trapz",)),
    _row("cumulative_trapezoid", _cumulative_fn, "cumulative_trapezoid(y, x=None, dx=None, "
         "dim=-1)", TRAPEZOID, _cumulative),
    _row("cov", _cov_fn, "cov(x, correction=1, fweights=None, aweights=None): the "
         "covariance of x's rows (variables)", "input, correction: int = 1, fweights?, "
         "aweights?", _cov, integer_args=("fweights",)),
    _row("corrcoef", torch.corrcoef, "corrcoef(x): Pearson correlation of x's rows",
         "input", _corrcoef),
    _row("renorm", torch.renorm, "renorm(x, p, dim, maxnorm): slices along dim with a "
         "larger p-norm scaled down to maxnorm", "input, p: float, dim: dim, "
         "maxnorm: float", _renorm),
    _row("inner", torch.inner, "inner(a, b): the product over the last dims (0-d: a * b)",
         "input, other", _inner),
    _row("sum_to_size", _sum_to_size_fn, "x.sum_to_size(*size): summed down to size",
         "input, *size: shape", _sum_to_size, methods=("sum_to_size",)),
]

# The family `gradscope ops` lists these rows under (expr/ops/__init__.py reads it).
BY_FAMILY = {"linear algebra": ROWS}
