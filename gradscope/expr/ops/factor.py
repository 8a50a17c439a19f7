"""The Cholesky factor (linalg.cholesky, cholesky, linalg.cholesky_ex), the QR factors and pdist,
with closed-form adjoints on plain tensors. Cholesky's is Murray's (2016): with L = chol(A)
and X = tril(Lᵀ L̄), Ā = L⁻ᵀ ½(X + tril(X, -1)ᵀ) L⁻¹ over symmetric matrices, then in each
entry of the triangle read (torch's own stays symmetric: a documented departure); QR's is
Walter and Lehmann's (m >= n); pdist's sends each pair's distance gradient to its two rows."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from gradscope.expr import ir
from gradscope.expr.ops.base import KINK, Build, Tensor, picked, structural
from gradscope.tensors import from_triangle, triangle_adjoint


def _cholesky_vjp(g: Tensor, out: Tensor, args: Sequence[Tensor], p: dict) -> list[Tensor]:
    upper = p.get("upper", False)
    low = out.mT if upper else out
    gl = g.mT if upper else g
    x = (low.mT @ gl).tril()
    middle = 0.5 * (x + x.tril(-1).mT)
    left = torch.linalg.solve_triangular(low.mT, middle, upper=True, left=True)
    symmetric = torch.linalg.solve_triangular(low, left, upper=False, left=False)
    return [triangle_adjoint(symmetric, upper)]


def _cholesky_jvp(ts: Sequence[Tensor], out: Tensor, args: Sequence[Tensor], p: dict
                  ) -> Tensor:
    upper = p.get("upper", False)
    low = out.mT if upper else out
    t = from_triangle(ts[0].expand_as(args[0]), upper)
    inner = torch.linalg.solve_triangular(low, t, upper=False, left=True)
    inner = torch.linalg.solve_triangular(low.mT, inner, upper=True, left=False)
    phi = inner.tril() - 0.5 * torch.diag_embed(inner.diagonal(dim1=-2, dim2=-1))
    dl = low @ phi
    return dl.mT if upper else dl


def _cholesky(a: Tensor, upper: bool = False) -> Tensor:
    return torch.linalg.cholesky(a, upper=upper)


def _cholesky_ex(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
                 names: Sequence[str] = ()) -> ir.Node:
    return b("linalg.cholesky", args[0], upper=p.get("upper", False))


def _qr_parts(a: Tensor) -> tuple[Tensor, Tensor]:
    if a.shape[-2] < a.shape[-1]:
        raise NotImplementedError("QR of a wide matrix (more columns than rows)")
    q, r = torch.linalg.qr(a)
    return q, r


def _right_solve(x: Tensor, r: Tensor) -> Tensor:
    """x R⁻ᵀ (R upper triangular)."""
    return torch.linalg.solve_triangular(r.mT, x, upper=False, left=False)


def _qr_vjp(g: Tensor, out: Tensor, args: Sequence[Tensor], p: dict) -> list[Tensor]:
    """A = QR (m >= n, reduced): Ā = Q (R̄ + tril(QᵀQ̄ - Q̄ᵀQ + RR̄ᵀ - R̄Rᵀ) R⁻ᵀ)
    + (Q̄ - Q QᵀQ̄) R⁻ᵀ, the part not picked having no upstream."""
    q, r = _qr_parts(args[0])
    gq, gr = (g, torch.zeros_like(r)) if p.get("_item", 0) % 2 == 0 else \
        (torch.zeros_like(q), g)
    qdq = q.mT @ gq
    rdr = r @ gr.mT
    inner = (qdq - qdq.mT + rdr - rdr.mT).tril()
    return [q @ (gr + _right_solve(inner, r)) + _right_solve(gq - q @ qdq, r)]


def _qr_jvp(ts: Sequence[Tensor], out: Tensor, args: Sequence[Tensor], p: dict) -> Tensor:
    q, r = _qr_parts(args[0])
    t = ts[0].expand_as(args[0])
    c = torch.linalg.solve_triangular(r, q.mT @ t, upper=True, left=False)  # Qᵀ dA R⁻¹
    skew = c.tril(-1) - c.tril(-1).mT
    dr = (c - skew) @ r
    if p.get("_item", 0) % 2 == 1:
        return dr
    return torch.linalg.solve_triangular(r, t, upper=True, left=False) - q @ (c - skew)


def _pairs(x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The rows of each pair i < j in torch's order, and their difference."""
    i, j = torch.triu_indices(x.shape[0], x.shape[0], 1, device=x.device)
    return i, j, x[i] - x[j]


def _distance_grad(diff: Tensor, dist: Tensor, p: float) -> Tensor:
    """d |diff|_p / d diff, row by row; 0 where the distance is 0 (torch's subgradient)."""
    d = dist.unsqueeze(-1)
    safe = torch.where(d == 0, torch.ones_like(d), d)
    if p == 0:
        out = torch.zeros_like(diff)
    elif p == 1:
        out = torch.sign(diff)
    elif p == 2:
        out = diff / safe
    elif p == float("inf"):
        top = (diff.abs() == d).to(diff.dtype)
        out = torch.sign(diff) * top / top.sum(-1, keepdim=True).clamp_min(1)
    else:
        out = torch.sign(diff) * (diff.abs() / safe) ** (p - 1)
    return torch.where(d == 0, torch.zeros_like(out), out)


def _pdist_vjp(g: Tensor, out: Tensor, args: Sequence[Tensor], p: dict) -> list[Tensor]:
    (x,) = args
    i, j, diff = _pairs(x)
    part = g.unsqueeze(-1) * _distance_grad(diff, out, p.get("p", 2.0))
    return [torch.zeros_like(x).index_add(0, i, part).index_add(0, j, -part)]


def _pdist_jvp(ts: Sequence[Tensor], out: Tensor, args: Sequence[Tensor], p: dict) -> Tensor:
    (x,) = args
    i, j, diff = _pairs(x)
    t = ts[0].expand_as(x)
    return (_distance_grad(diff, out, p.get("p", 2.0)) * (t[i] - t[j])).sum(-1)


def _pdist_branch(x: Tensor, p: float = 2.0) -> Tensor:
    # two rows meeting (or, p <= 1, one coordinate of a pair crossing) is a kink
    diff = _pairs(x)[2]
    return torch.sign(diff).sum(-1) if p > 1 else (torch.sign(diff) + 1).prod(-1)


def _pdist(x: Tensor, p: float = 2.0) -> Tensor:
    return torch.nn.functional.pdist(x, p)


def _cholesky_ex_fn(a: Tensor, upper: bool = False, _item: int = 0) -> Tensor:
    """linalg.cholesky_ex's L (or info), NaN for a matrix that is not positive-definite: torch
    leaves a partial factor there, which is no function of A (it has no derivative to
    compare: undefined, not a mismatch)."""
    factor, info = torch.linalg.cholesky_ex(a, upper=upper)
    if _item != 0:
        return info
    failed = (info != 0).reshape(*info.shape, 1, 1)
    return torch.where(failed, torch.full((), float("nan"), dtype=factor.dtype), factor) \
        if bool(failed.any()) else factor


ROWS = [
    structural("linalg.cholesky", _cholesky, "linalg.cholesky(A, upper=False): the Cholesky "
               "factor of a symmetric positive-definite A (reading one triangle)",
               "input, upper: bool = False", vjp=_cholesky_vjp, jvp=_cholesky_jvp,
               aliases=("cholesky",)),
    structural("linalg.cholesky_ex", _cholesky_ex_fn,
               "linalg.cholesky_ex(A)[0]", "input, upper: bool = False",
               decompose=_cholesky_ex, returns=("L", "info"), data_fields=("info",)),
    structural("linalg.qr", picked(torch.linalg.qr), "linalg.qr(A).Q / .R of a tall or square "
               "A (reduced)", "input", vjp=_qr_vjp, jvp=_qr_jvp, returns=("Q", "R"),
               aliases=("qr",)),
    structural("pdist", _pdist, "F.pdist(x, p=2): the distances of x's rows, each pair once",
               "input, p: float = 2.0", vjp=_pdist_vjp, jvp=_pdist_jvp,
               branch=_pdist_branch, kink=KINK),
]

# The family `gradscope ops` lists these rows under (expr/ops/__init__.py reads it).
BY_FAMILY = {"linear algebra": ROWS}
