"""Linear algebra and scans: outer, einsum, trace, det, inverse, diag, diagonal, tril/triu,
cross, cumsum, cumprod, logcumsumexp. Adjoints are the textbook closed forms on plain tensors
(det: g·det·A⁻ᵀ; inverse: −A⁻ᵀ g A⁻ᵀ; einsum: the same contraction with the operand's
subscripts as output), never autograd."""

from __future__ import annotations

import string
from collections.abc import Callable, Sequence
from typing import Any

import torch

from gradscope.expr.ops.base import Op, Tensor, multilinear_jvp, structural
from gradscope.tensors import sum_to_shape

Adjoint = Callable[[Tensor, Tensor, Sequence[Tensor], dict], list[Tensor]]
MAX_SCAN_PAIRS = 1 << 26  # cumprod and logcumsumexp adjoints hold n x n numbers per slice


def _row(name: str, fn: Callable[..., Tensor], summary: str, sig: str, vjp: Adjoint,
         jvp: Callable[..., Tensor] | None = None, **kw: Any) -> Op:
    return structural(name, fn, summary, sig, vjp=vjp, jvp=jvp or multilinear_jvp(fn), **kw)


def _outer_vjp(g: Tensor, out: Tensor, args: Sequence[Tensor], p: dict) -> list[Tensor]:
    a, b = args
    return [g @ b, g.transpose(0, 1) @ a]


def _einsum(*operands: Tensor, equation: str) -> Tensor:
    return torch.einsum(equation, *operands)


def explicit(equation: str, ranks: Sequence[int]) -> tuple[list[str], str]:
    """An einsum equation with `...` spelled out in unused letters and the output made
    explicit (torch's implicit output: the letters used once, sorted)."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    inputs = lhs.split(",")
    free = [c for c in string.ascii_letters if c not in eq]
    widest = max((r - len(s.replace("...", "")) for s, r in zip(inputs, ranks, strict=True)
                  if "..." in s), default=0)
    ell = "".join(free[:widest])
    spelled = []
    for s, r in zip(inputs, ranks, strict=True):
        if "..." in s:
            k = r - len(s.replace("...", ""))
            s = s.replace("...", ell[widest - k:])
        spelled.append(s)
    if not arrow:
        counts = {c: "".join(spelled).count(c) for c in "".join(spelled)}
        rhs = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    else:
        rhs = rhs.replace("...", ell)
    return spelled, rhs


def _einsum_vjp(g: Tensor, out: Tensor, args: Sequence[Tensor], p: dict) -> list[Tensor]:
    spelled, rhs = explicit(p["equation"], [a.ndim for a in args])
    grads = []
    for i, (sub, a) in enumerate(zip(spelled, args, strict=True)):
        if len(set(sub)) != len(sub):
            raise NotImplementedError("einsum with a repeated index within one operand")
        others = [s for j, s in enumerate(spelled) if j != i]
        known = set(rhs).union(*others) if others else set(rhs)
        kept = "".join(c for c in sub if c in known)  # letters summed only here: broadcast
        eq = ",".join([rhs, *others]) + "->" + kept
        part = torch.einsum(eq, g, *[a2 for j, a2 in enumerate(args) if j != i])
        grads.append(_broadcast_into(part, kept, sub, a))
    return grads


def _broadcast_into(part: Tensor, kept: str, sub: str, a: Tensor) -> Tensor:
    """The adjoint over the operand's own letters: summed over the dims einsum broadcast
    (size 1 in the operand), broadcast over the letters only this operand has."""
    for k, c in enumerate(kept):
        if a.shape[sub.index(c)] == 1 and part.shape[k] != 1:
            part = part.sum(k, keepdim=True)
    shape = [part.shape[kept.index(c)] if c in kept else 1 for c in sub]
    return part.reshape(shape).expand(a.shape)


def _trace_vjp(g: Tensor, out: Tensor, args: Sequence[Tensor], p: dict) -> list[Tensor]:
    (a,) = args
    return [g * torch.eye(a.shape[0], a.shape[1], dtype=a.dtype, device=a.device)]


def _det_vjp(g: Tensor, out: Tensor, args: Sequence[Tensor], p: dict) -> list[Tensor]:
    (a,) = args
    inv_t = torch.linalg.inv(a).transpose(-1, -2)
    return [(g * out)[..., None, None] * inv_t]


def _det_jvp(ts: Sequence[Tensor], out: Tensor, args: Sequence[Tensor], p: dict) -> Tensor:
    (a,), (t,) = args, ts
    solved = torch.linalg.solve(a, t.expand_as(a))
    return out * solved.diagonal(dim1=-2, dim2=-1).sum(-1)


def _inv_vjp(g: Tensor, out: Tensor, args: Sequence[Tensor], p: dict) -> list[Tensor]:
    inv_t = out.transpose(-1, -2)
    return [-(inv_t @ g @ inv_t)]


def _inv_jvp(ts: Sequence[Tensor], out: Tensor, args: Sequence[Tensor], p: dict) -> Tensor:
    return -(out @ ts[0].expand_as(args[0]) @ out)


def _diag(x: Tensor, diagonal: int = 0) -> Tensor:
    return torch.diag(x, diagonal)


def _diag_vjp(g: Tensor, out: Tensor, args: Sequence[Tensor], p: dict) -> list[Tensor]:
    (x,) = args
    k = p.get("diagonal", 0)
    if x.ndim == 1:
        return [torch.diagonal(g, k)]
    return [torch.zeros_like(x).diagonal_scatter(g, k)]


def _diagonal(x: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    return torch.diagonal(x, offset, dim1, dim2)


def _diagonal_vjp(g: Tensor, out: Tensor, args: Sequence[Tensor], p: dict) -> list[Tensor]:
    (x,) = args
    return [torch.zeros_like(x).diagonal_scatter(g, p["offset"], p["dim1"], p["dim2"])]


def _tri(fn: Callable[..., Tensor]) -> Adjoint:
    def vjp(g: Tensor, out: Tensor, args: Sequence[Tensor], p: dict) -> list[Tensor]:
        return [fn(g, p.get("diagonal", 0))]
    return vjp


def _cross(a: Tensor, b: Tensor, dim: int | None = None) -> Tensor:
    return torch.linalg.cross(a, b, dim=-1 if dim is None else dim)


def _cross_vjp(g: Tensor, out: Tensor, args: Sequence[Tensor], p: dict) -> list[Tensor]:
    a, b = args
    d = -1 if p.get("dim") is None else p["dim"]
    ga, gb = torch.linalg.cross(b.expand_as(g), g, dim=d), torch.linalg.cross(
        g, a.expand_as(g), dim=d)
    return [sum_to_shape(ga, a.shape), sum_to_shape(gb, b.shape)]


def _rev_cumsum(g: Tensor, dim: int) -> Tensor:
    return g.flip(dim).cumsum(dim).flip(dim)


def _cumsum_vjp(g: Tensor, out: Tensor, args: Sequence[Tensor], p: dict) -> list[Tensor]:
    return [_rev_cumsum(g, p["dim"])]


def _scan_matrix(x: Tensor, out: Tensor, d: int, kind: str) -> Tensor:
    """M[..., i, j] = d out_j / d x_i (0 for j < i), the scanned dim moved last."""
    n = x.shape[d]
    if x.numel() * n > MAX_SCAN_PAIRS:
        raise NotImplementedError(f"a {kind} over {n} elements per slice is too large for "
                                  "its closed-form adjoint here")
    moved = x.movedim(d, -1)
    upper = torch.ones(n, n, dtype=torch.bool, device=x.device).triu()  # [i, j]: j >= i
    if kind == "cumprod":  # prod_{k <= j, k != i} x_k: exact at zeros (no division)
        eye = torch.eye(n, dtype=torch.bool, device=x.device)
        rows = torch.where(eye, torch.ones_like(moved)[..., None, :], moved[..., None, :])
        local = rows.cumprod(-1)
    else:  # logcumsumexp: exp(x_i - out_j)
        local = torch.exp(moved[..., :, None] - out.movedim(d, -1)[..., None, :])
    return torch.where(upper, local, torch.zeros_like(local))


def _scan(kind: str) -> tuple[Adjoint, Callable[..., Tensor]]:
    def vjp(g: Tensor, out: Tensor, args: Sequence[Tensor], p: dict) -> list[Tensor]:
        m = _scan_matrix(args[0], out, p["dim"], kind)
        return [(g.movedim(p["dim"], -1)[..., None, :] * m).sum(-1).movedim(-1, p["dim"])]

    def jvp(ts: Sequence[Tensor], out: Tensor, args: Sequence[Tensor], p: dict) -> Tensor:
        m = _scan_matrix(args[0], out, p["dim"], kind)
        t = ts[0].expand_as(args[0]).movedim(p["dim"], -1)
        return (t[..., :, None] * m).sum(-2).movedim(-1, p["dim"])
    return vjp, jvp


def _cumsum(x: Tensor, dim: int) -> Tensor:
    return torch.cumsum(x, dim)


def _cumprod(x: Tensor, dim: int) -> Tensor:
    return torch.cumprod(x, dim)


def _logcumsumexp(x: Tensor, dim: int) -> Tensor:
    return torch.logcumsumexp(x, dim)


ROWS = [
    _row("outer", torch.outer, "outer(a, b) of two 1-D tensors", "input, vec2", _outer_vjp,
         aliases=("ger",)),
    _row("einsum", _einsum, "einsum('ij,jk->ik', a, b, ...)",
         "equation: str, *operands: list", _einsum_vjp),
    _row("trace", torch.trace, "trace(A) of a matrix", "input", _trace_vjp),
    _row("det", torch.linalg.det, "determinant det(A) (square, batched)", "input", _det_vjp,
         jvp=_det_jvp, aliases=("linalg.det",)),
    _row("inverse", torch.linalg.inv, "matrix inverse (square, batched)", "input", _inv_vjp,
         jvp=_inv_jvp, aliases=("linalg.inv",)),
    _row("diag", _diag, "diag(v) → matrix, diag(A) → its diagonal", "input, diagonal: int = 0",
         _diag_vjp),
    _row("diagonal", _diagonal, "diagonal(A, offset=0, dim1=0, dim2=1)",
         "input, offset: int = 0, dim1: dim = 0, dim2: dim = 1", _diagonal_vjp),
    _row("tril", torch.tril, "lower triangle tril(A, diagonal=0)", "input, diagonal: int = 0",
         _tri(torch.tril)),
    _row("triu", torch.triu, "upper triangle triu(A, diagonal=0)", "input, diagonal: int = 0",
         _tri(torch.triu)),
    _row("cross", _cross, "cross product along dim (default -1) of size 3",
         "input, other, dim: dim = None", _cross_vjp, aliases=("linalg.cross",)),
    _row("cumsum", _cumsum, "cumulative sum along dim", "input, dim: dim", _cumsum_vjp),
    _row("cumprod", _cumprod, "cumulative product along dim (exact at zeros)",
         "input, dim: dim", *_scan("cumprod")),
    _row("logcumsumexp", _logcumsumexp, "log of the cumulative sum of exp along dim",
         "input, dim: dim", *_scan("logcumsumexp")),
]

# The family `gradscope ops` lists these rows under (expr/ops/__init__.py reads it).
BY_FAMILY = {"linear algebra": ROWS}
