"""torch functions that are another row under a different spelling or a short composition of
rows: the identities of real tensors (clone, contiguous, conj, real, …), the `_copy` variants
of views, clamp_max, rsub, logaddexp2, mvlgamma, the normal distribution's special functions
(ndtr, ndtri), entr and xlog1py, and everyday shape spellings (ravel, fliplr, flipud,
movedim, view_as, atleast_nd, select, unflatten, tile, rot90). Torch runs its own function;
the symbolic engine differentiates the composition written here (`decompose`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from gradscope.expr import ir
from gradscope.expr.ops.base import Build, Op, Tensor
from gradscope.expr.ops.base import decomposed as _row
from gradscope.expr.ops.base import written_as as _as

Decompose = Any


def _same(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
          names: Sequence[str] = ()) -> ir.Node:
    return b("pos", args[0])


def _identity(name: str) -> Op:
    fn = getattr(torch, name)
    return _row(name, fn, f"{name}(x): x itself on a real tensor", "input", _same)


def _copy(name: str, base: str, sig: str) -> Op:
    return _row(name, getattr(torch, name), f"{base} that copies", sig, _as(base))


def _clamp_max(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
               names: Sequence[str] = ()) -> ir.Node:
    x, top = args
    return b("clamp", x, -math.inf, top)


def _rsub(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
          names: Sequence[str] = ()) -> ir.Node:
    x, other = args
    return b("sub", other, x if p["alpha"] == 1 else b("mul", p["alpha"], x))


def _logaddexp2(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
                names: Sequence[str] = ()) -> ir.Node:
    x, y = args
    ln2 = math.log(2.0)
    return b("div", b("logaddexp", b("mul", x, ln2), b("mul", y, ln2)), ln2)


def _mvlgamma(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
              names: Sequence[str] = ()) -> ir.Node:
    (x,) = args
    k = p["p"]
    out: ir.Node = b.num(k * (k - 1) / 4 * math.log(math.pi))
    for j in range(k):
        out = b("add", out, b("lgamma", b("sub", x, j / 2)))
    return out


def _ndtr(b: Build, x: ir.Node) -> ir.Node:
    return b("mul", 0.5, b("erfc", b("mul", -1 / math.sqrt(2.0), x)))


def _ndtr_row(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
              names: Sequence[str] = ()) -> ir.Node:
    return _ndtr(b, args[0])


def _ndtri(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
           names: Sequence[str] = ()) -> ir.Node:
    return b("mul", math.sqrt(2.0), b("erfinv", b("sub", b("mul", 2, args[0]), 1)))


def _entr(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
          names: Sequence[str] = ()) -> ir.Node:
    (x,) = args
    return b("neg", b("xlogy", x, x))


def _xlog1py(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
             names: Sequence[str] = ()) -> ir.Node:
    x, y = args
    return b("xlogy", x, b("add", y, 1))


def _reshaped(shape_of: Any) -> Decompose:
    """A reshape to a shape computed from the arguments' shapes and the call's parameters."""
    def decompose(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
                  names: Sequence[str] = ()) -> ir.Node:
        return b("reshape", args[0], shape=tuple(shape_of(metas, p)))
    return decompose


def _atleast(n: int) -> Any:
    def shape(metas: Sequence[Tensor], p: dict) -> tuple[int, ...]:
        s = tuple(metas[0].shape)
        if len(s) >= n:
            return s
        if n == 3 and len(s) == 2:  # torch: (a, b) → (a, b, 1)
            return (*s, 1)
        if n == 3 and len(s) == 1:  # (a,) → (1, a, 1)
            return (1, *s, 1)
        return (1,) * (n - len(s)) + s
    return shape


def _unflatten_shape(metas: Sequence[Tensor], p: dict) -> tuple[int, ...]:
    s = list(metas[0].shape)
    d = p["dim"] % len(s)
    sizes = list(p["sizes"])
    if -1 in sizes:
        known = math.prod(v for v in sizes if v != -1)
        sizes[sizes.index(-1)] = s[d] // known if known else 0
    return (*s[:d], *sizes, *s[d + 1:])


def _movedim(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
             names: Sequence[str] = ()) -> ir.Node:
    n = metas[0].ndim
    src = [p["source"]] if isinstance(p["source"], int) else list(p["source"])
    dst = [p["destination"]] if isinstance(p["destination"], int) else list(p["destination"])
    src, dst = [s % n for s in src], [d % n for d in dst]
    rest = iter(i for i in range(n) if i not in src)
    placed = dict(zip(dst, src, strict=True))
    order = tuple(placed[i] if i in placed else next(rest) for i in range(n))
    return b("permute", args[0], dims=order)


def _select(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
            names: Sequence[str] = ()) -> ir.Node:
    d = p["dim"] % metas[0].ndim
    i = p["index"] % metas[0].shape[d]
    return b("squeeze", b("narrow", args[0], dim=d, start=i, length=1), dim=(d,))


def _tile(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
          names: Sequence[str] = ()) -> ir.Node:
    """x.repeat(r) / tile: x's dims interleaved with ones, expanded by r, pairs merged."""
    reps = tuple(p["dims"])
    s = tuple(metas[0].shape)
    n = max(len(reps), len(s))
    reps, s = (1,) * (n - len(reps)) + reps, (1,) * (n - len(s)) + s
    wide = b("reshape", args[0], shape=tuple(d for v in s for d in (1, v)))
    grown = b("expand", wide, size=tuple(d for r, v in zip(reps, s, strict=True)
                                         for d in (r, v)))
    return b("reshape", grown, shape=tuple(r * v for r, v in zip(reps, s, strict=True)))


def _rot90(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
           names: Sequence[str] = ()) -> ir.Node:
    k = p["k"] % 4
    d0, d1 = (d % metas[0].ndim for d in p["dims"] or (0, 1))
    x = args[0]
    if k == 1:
        return b("transpose", b("flip", x, dims=(d1,)), dim0=d0, dim1=d1)
    if k == 2:
        return b("flip", x, dims=(d0, d1))
    if k == 3:
        return b("flip", b("transpose", x, dim0=d0, dim1=d1), dims=(d1,))
    return b("pos", x)


def _rot90_fn(x: Tensor, k: int = 1, dims: tuple[int, ...] | None = None) -> Tensor:
    return torch.rot90(x, k, dims or (0, 1))


def _tile_fn(x: Tensor, dims: tuple[int, ...]) -> Tensor:
    return torch.tile(x, dims)


def _repeat_fn(x: Tensor, dims: tuple[int, ...]) -> Tensor:
    return x.repeat(*dims)


def _as_shape(base: str) -> Decompose:
    def decompose(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
                  names: Sequence[str] = ()) -> ir.Node:
        key = "size" if base == "expand" else "shape"
        return b(base, args[0], **{key: tuple(metas[1].shape)})
    return decompose


SHAPE_ROWS = [
    *(_identity(n) for n in ("clone", "conj", "conj_physical", "resolve_conj", "resolve_neg",
                             "real", "positive", "alias_copy")),
    _row("contiguous", lambda x: x.contiguous(), "x itself (a method: x.contiguous())",
         "input", _same),
    _copy("expand_copy", "expand", "input, size: shape"),
    _copy("permute_copy", "permute", "input, dims: shape"),
    _copy("squeeze_copy", "squeeze", "input, dim: dims = None"),
    _copy("unsqueeze_copy", "unsqueeze", "input, dim: dim"),
    _copy("transpose_copy", "transpose", "input, dim0: dim, dim1: dim"),
    _copy("t_copy", "t", "input"),
    _row("view_copy", torch.view_copy, "reshape that copies", "input, size: shape",
         _reshaped(lambda metas, p: p["size"])),
    _copy("diagonal_copy", "diagonal", "input, offset: int = 0, dim1: dim = 0, dim2: dim = 1"),
    _copy("narrow_copy", "narrow", "input, dim: dim, start: int, length: int"),
]

MATH_ROWS = [
    _row("clamp_max", torch.clamp_max, "min(x, max) (kink where they meet)", "input, max",
         _clamp_max),
    _row("rsub", torch.rsub, "other − alpha·input", "input, other, alpha: float = 1.0", _rsub),
    _row("logaddexp2", torch.logaddexp2, "log2(2**a + 2**b)", "input, other", _logaddexp2),
    _row("mvlgamma", torch.mvlgamma, "multivariate log-gamma of order p, x > (p − 1)/2",
         "input, p: int", _mvlgamma, aliases=("special.multigammaln",)),
    _row("special.ndtr", torch.special.ndtr, "the standard normal CDF", "input", _ndtr_row),
    _row("special.ndtri", torch.special.ndtri, "the standard normal quantile, 0 < p < 1",
         "input", _ndtri),
    _row("special.entr", torch.special.entr, "−x·log(x) (0 at 0)", "input", _entr),
    _row("special.xlog1py", torch.special.xlog1py, "x·log1p(y), 0 where x == 0", "input, other",
         _xlog1py),
]

SHAPE_ROWS += [
    _row("ravel", torch.ravel, "flatten(x) into one dim", "input", _as("flatten")),
    _row("fliplr", torch.fliplr, "flip(x, (1,))", "input", _as("flip", dims=(1,))),
    _row("flipud", torch.flipud, "flip(x, (0,))", "input", _as("flip", dims=(0,))),
    _row("movedim", torch.movedim, "x with dims moved from source to destination",
         "input, source: ints, destination: ints", _movedim, aliases=("moveaxis",)),
    _row("view_as", lambda x, other: x.view_as(other), "x reshaped to other's shape",
         "input, other", _as_shape("reshape"), methods=("view_as",)),
    _row("reshape_as", lambda x, other: x.reshape_as(other), "x reshaped to other's shape",
         "input, other", _as_shape("reshape"), methods=("reshape_as",)),
    _row("expand_as", lambda x, other: x.expand_as(other), "x expanded to other's shape",
         "input, other", _as_shape("expand"), methods=("expand_as",)),
    *(_row(f"atleast_{n}d", getattr(torch, f"atleast_{n}d"), f"x with at least {n} dims",
           "input", _reshaped(_atleast(n))) for n in (1, 2, 3)),
    _row("unflatten", torch.unflatten, "dim split into sizes", "input, dim: dim, sizes: ints",
         _reshaped(_unflatten_shape)),
    _row("select", torch.select, "x[..., index, ...] at dim (that dim dropped)",
         "input, dim: dim, index: int", _select),
    _row("tile", _tile_fn, "x repeated dims times (tile)", "input, dims: ints", _tile),
    _row("repeat", _repeat_fn, "x.repeat(*sizes)", "input, *dims: shape", _tile,
         methods=("repeat",)),
    _row("rot90", _rot90_fn, "x rotated by 90° k times in the plane dims",
         "input, k: int = 1, dims: ints = None", _rot90),
]

ROWS = MATH_ROWS + SHAPE_ROWS

# The families `gradscope ops` lists these rows under (expr/ops/__init__.py reads them).
BY_FAMILY = {"math": MATH_ROWS, "shape": SHAPE_ROWS}
