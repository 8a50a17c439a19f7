"""Linear layers and the BLAS family as torch users call them: F.linear, F.bilinear, addmm,
addmv, addr, baddbmm, addbmm, addcmul, addcdiv, lerp, vdot, vecdot, multi_dot, kron,
tensordot, and the distances built on them (dist, pairwise_distance, cdist) and logdet. Torch
runs its own kernel (what autograd checks); the symbolic engine differentiates the composition
written here with the table's other rows (`decompose`), an independent derivation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from gradscope.expr import ir
from gradscope.expr.ops.base import Build, Op, Tensor, structural
from gradscope.expr.ops.base import given as _given

LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _scaled(b: Build, beta: float, base: ir.Node, alpha: float, product: ir.Node) -> ir.Node:
    """beta·base + alpha·product; with beta 0 the base is ignored, as torch ignores it (a NaN
    there does not propagate)."""
    term = product if alpha == 1 else b("mul", alpha, product)
    if beta == 0:
        return term
    return b("add", base if beta == 1 else b("mul", beta, base), term)


def _addmm_like(product: str, summed: bool = False):
    def decompose(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
                  names: Sequence[str] = ()) -> ir.Node:
        base, left, right = args
        prod = b("outer", left, right) if product == "outer" else b("matmul", left, right)
        if summed:
            prod = b("sum", prod, dim=(0,))
        return _scaled(b, p["beta"], base, p["alpha"], prod)
    return decompose


def _linear(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
            names: Sequence[str] = ()) -> ir.Node:
    given = _given(args, names, ("input", "weight"))
    w = given["weight"]
    wide = metas[list(given).index("weight")].ndim >= 2
    y = b("matmul", given["input"], b("mT", w) if wide else w)
    return b("add", y, given["bias"]) if "bias" in given else y


def _bilinear(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
              names: Sequence[str] = ()) -> ir.Node:
    given = _given(args, names, ("input1", "input2", "weight"))
    y = b("einsum", given["input1"], given["weight"], given["input2"],
          equation="...i,oij,...j->...o")
    return b("add", y, given["bias"]) if "bias" in given else y


def _addc(op: str):
    def decompose(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
                  names: Sequence[str] = ()) -> ir.Node:
        base, t1, t2 = args
        return b("add", base, b("mul", p["value"], b(op, t1, t2)))
    return decompose


def _lerp(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
          names: Sequence[str] = ()) -> ir.Node:
    start, end, weight = args
    return b("add", start, b("mul", weight, b("sub", end, start)))


def _vecdot(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
            names: Sequence[str] = ()) -> ir.Node:
    x, y = args
    return b("sum", b("mul", x, y), dim=(p.get("dim", -1),))


def _multi_dot(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
               names: Sequence[str] = ()) -> ir.Node:
    out = args[0]
    for nxt in args[1:]:
        out = b("matmul", out, nxt)
    return out


def _kron(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
          names: Sequence[str] = ()) -> ir.Node:
    """a ⊗ b: a's dims interleaved with ones times b's, then each pair merged."""
    x, y = args
    n = max(metas[0].ndim, metas[1].ndim)
    sa = (1,) * (n - metas[0].ndim) + tuple(metas[0].shape)
    sb = (1,) * (n - metas[1].ndim) + tuple(metas[1].shape)
    wide_a = tuple(d for s in sa for d in (s, 1))
    wide_b = tuple(d for s in sb for d in (1, s))
    product = b("mul", b("reshape", x, shape=wide_a), b("reshape", y, shape=wide_b))
    return b("reshape", product, shape=tuple(i * j for i, j in zip(sa, sb, strict=True)))


def _tensordot_equation(na: int, nb: int, dims: Any) -> str:
    if isinstance(dims, int):
        da, db = list(range(na - dims, na)), list(range(dims))
    else:
        da, db = ([dims[0]] if isinstance(dims[0], int) else list(dims[0]),
                  [dims[1]] if isinstance(dims[1], int) else list(dims[1]))
    da, db = [d % na for d in da], [d % nb for d in db]
    a = list(LETTERS[:na])
    bl = list(LETTERS[na:na + nb])
    for i, j in zip(da, db, strict=True):
        bl[j] = a[i]
    out = [a[i] for i in range(na) if i not in da] + [bl[j] for j in range(nb) if j not in db]
    return f"{''.join(a)},{''.join(bl)}->{''.join(out)}"


def _tensordot(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
               names: Sequence[str] = ()) -> ir.Node:
    x, y = args
    return b("einsum", x, y,
             equation=_tensordot_equation(metas[0].ndim, metas[1].ndim, p["dims"]))


def _tensordot_fn(a: Tensor, b: Tensor, dims: Any = 2) -> Tensor:
    return torch.tensordot(a, b, dims=dims)


def _dist(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
          names: Sequence[str] = ()) -> ir.Node:
    x, y = args
    return b("norm", b("sub", x, y), p=p["p"])


def _pairwise(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
              names: Sequence[str] = ()) -> ir.Node:
    x, y = args
    return b("norm", b("add", b("sub", x, y), p["eps"]), p=p["p"], dim=(-1,),
             keepdim=p["keepdim"])


def _cdist(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
           names: Sequence[str] = ()) -> ir.Node:
    x, y = args
    apart = b("sub", b("unsqueeze", x, dim=-2), b("unsqueeze", y, dim=-3))
    return b("norm", apart, p=p["p"], dim=(-1,))


def _cdist_fn(x1: Tensor, x2: Tensor, p: float = 2.0,
              compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> Tensor:
    return torch.cdist(x1, x2, p, compute_mode)


def _logdet(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
            names: Sequence[str] = ()) -> ir.Node:
    return b("log", b("det", args[0]))


def _row(name: str, fn: Any, summary: str, sig: str, decompose: Any, **kw: Any) -> Op:
    return structural(name, fn, summary, sig, decompose=decompose, **kw)


SCALED = "beta: float = 1.0, alpha: float = 1.0"

ROWS = [
    _row("linear", F.linear, "x @ weight.T + bias (F.linear)", "input, weight, bias?", _linear),
    _row("bilinear", F.bilinear, "x1ᵀ A x2 + b per output feature (F.bilinear)",
         "input1, input2, weight, bias?", _bilinear),
    _row("addmm", torch.addmm, "beta·input + alpha·(mat1 @ mat2)",
         f"input, mat1, mat2, {SCALED}", _addmm_like("matmul")),
    _row("addmv", torch.addmv, "beta·input + alpha·(mat @ vec)",
         f"input, mat, vec, {SCALED}", _addmm_like("matmul")),
    _row("addr", torch.addr, "beta·input + alpha·outer(vec1, vec2)",
         f"input, vec1, vec2, {SCALED}", _addmm_like("outer")),
    _row("baddbmm", torch.baddbmm, "beta·input + alpha·(batch1 @ batch2), per batch",
         f"input, batch1, batch2, {SCALED}", _addmm_like("matmul")),
    _row("addbmm", torch.addbmm, "beta·input + alpha·Σ_b (batch1[b] @ batch2[b])",
         f"input, batch1, batch2, {SCALED}", _addmm_like("matmul", summed=True)),
    _row("addcmul", torch.addcmul, "input + value·t1·t2",
         "input, tensor1, tensor2, value: float = 1.0", _addc("mul")),
    _row("addcdiv", torch.addcdiv, "input + value·t1/t2",
         "input, tensor1, tensor2, value: float = 1.0", _addc("div")),
    _row("lerp", torch.lerp, "start + weight·(end − start)", "input, end, weight", _lerp),
    _row("vdot", torch.vdot, "Σ x·y of two vectors", "input, other", _vecdot),
    _row("linalg.vecdot", torch.linalg.vecdot, "Σ x·y along dim (default -1)",
         "x, y, dim: dim = -1", _vecdot),
    _row("linalg.multi_dot", lambda *ts: torch.linalg.multi_dot(list(ts)),
         "the chain a @ b @ c …", "*tensors: list", _multi_dot),
    _row("kron", torch.kron, "Kronecker product", "input, other", _kron),
    _row("tensordot", _tensordot_fn, "contraction over dims (an int or two lists)",
         "a, b, dims: contraction = 2", _tensordot),
    _row("dist", torch.dist, "p-norm of x − y (kink where they meet)",
         "input, other, p: float = 2.0", _dist),
    _row("pairwise_distance", F.pairwise_distance, "p-norm of x1 − x2 + eps along the last dim",
         "x1, x2, p: float = 2.0, eps: float = 1e-06, keepdim: bool = False", _pairwise),
    _row("cdist", _cdist_fn, "p-norm distance between each row of x1 and each of x2",
         "x1, x2, p: float = 2.0, compute_mode: str = "
         "'use_mm_for_euclid_dist_if_necessary'", _cdist, choices={"compute_mode": (
             "use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
             "donot_use_mm_for_euclid_dist")}),
    _row("logdet", torch.logdet, "log det(A), det > 0", "input", _logdet),
]

# The family `gradscope ops` lists these rows under (expr/ops/__init__.py reads it).
BY_FAMILY = {"linear algebra": ROWS}
