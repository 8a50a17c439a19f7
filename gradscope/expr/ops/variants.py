"""torch's other names and variants of rows: x.H and x.mH (the transposes, on real tensors),
x.double(), nansum/nanmean, float_power, sgn, nan_to_num (finite inputs), ldexp; and functions
with no textbook sympy form: fmax/fmin (a tie's gradient to the first argument), the modified
Bessel functions i0, i1, i0e, i1e, erfcx, log_ndtr and polygamma."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from gradscope.errors import UsageError
from gradscope.expr import ir
from gradscope.expr import sympy_functions as sf
from gradscope.expr.ops.base import (
    KINK,
    POLE,
    Build,
    Op,
    Tensor,
    decomposed,
    elementwise,
    signature,
    structural,
    written_as,
)
from gradscope.expr.ops.special import pole_left

MAX_POLYGAMMA = 16  # torch's polygamma for large n is slow and overflows float64 anyway


def _row(name: str, fn: Any, summary: str, sig: str, base: str, **kw: Any) -> Op:
    return decomposed(name, fn, summary, sig, written_as(base), **kw)


def _vector_norm_as_norm(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
                         names: Sequence[str] = ()) -> ir.Node:
    return b("norm", *args, p=p["ord"], dim=p["dim"], keepdim=p["keepdim"])


def _double(x: Tensor) -> Tensor:
    return x.double()


def _float(x: Tensor) -> Tensor:
    return x.float()


def _vector_norm(x: Tensor, ord: float = 2.0, dim: Any = None, keepdim: bool = False
                 ) -> Tensor:
    return torch.linalg.vector_norm(x, ord, dim, keepdim)


def _nan_to_num(x: Tensor, nan: float | None = None, posinf: float | None = None,
                neginf: float | None = None) -> Tensor:
    return torch.nan_to_num(x, nan, posinf, neginf)


def _finite(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
            names: Sequence[str] = ()) -> ir.Node:
    return b("pos", args[0])  # the identity on finite values, the only ones gradscope checks


def _ldexp(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
           names: Sequence[str] = ()) -> ir.Node:
    x, e = args
    return b("mul", x, b("exp2", e))


def _nan_reduction(fn: Any) -> Any:
    def run(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
        return fn(x, dim=dim, keepdim=keepdim)
    return run


def _float_power(x: Tensor, exponent: Tensor) -> Tensor:
    return torch.float_power(x, exponent)


def _polygamma_fn(x: Tensor, n: int) -> Tensor:
    return torch.polygamma(n, x)


def _polygamma_sym(x: Any, n: int) -> Any:
    if not 0 <= n <= MAX_POLYGAMMA:
        raise UsageError(f"polygamma's order n is 0 to {MAX_POLYGAMMA} here, got {n}")
    return sf.polygamma(n)(x)


DIMS = "input, dim: dims = None, keepdim: bool = False"

NAME_ROWS = [
    _row("H", lambda x: x.H, "x.H: the conjugate "
         "transpose (the transpose of a real matrix)", "input", "T", symbol=".H"),
    _row("mH", lambda x: x.mH, "x.mH: the last two dims swapped (real tensors)", "input",
         "mT", symbol=".mH"),
    _row("double", _double, "x.double(): x in float64", "input", "pos",
         methods=("double",)),
    _row("float", _float, "x.float(): x in float32 (the check's tolerance follows)", "input",
         "pos", methods=("float",)),
    decomposed("linalg.vector_norm", _vector_norm, "linalg.vector_norm(x, ord=2, dim=None, "
               "keepdim=False)", "input, ord: float = 2.0, dim: dims = None, "
               "keepdim: bool = False", _vector_norm_as_norm),
    _row("nansum", _nan_reduction(torch.nansum), "nansum(x[, dim, keepdim]): sum, NaN as 0",
         DIMS, "sum"),
    _row("nanmean", _nan_reduction(torch.nanmean), "nanmean(x[, dim, keepdim]): mean of the "
         "non-NaN elements", DIMS, "mean"),
    _row("float_power", _float_power, "float_power(a, b): a ** b in float64", "input, exponent",
         "pow"),
    _row("sgn", torch.sgn, "sgn(x): sign of a real tensor (zero gradient)", "input", "sign"),
    structural("nan_to_num", _nan_to_num, "nan_to_num(x, nan, posinf, neginf): x on finite "
               "values", "input, nan: float = None, posinf: float = None, neginf: float = None",
               decompose=_finite),
    structural("ldexp", torch.ldexp, "ldexp(x, e) = x * 2 ** e", "input, other",
               decompose=_ldexp),
]

SPECIAL_ROWS = [
    elementwise("fmax", torch.fmax, sf.fmax, "fmax(a, b): maximum that ignores NaN (a tie's "
                "gradient goes to a)", 2, branch=lambda a, b: torch.sign(a - b), kink=KINK),
    elementwise("fmin", torch.fmin, sf.fmin, "fmin(a, b): minimum that ignores NaN (a tie's "
                "gradient goes to a)", 2, branch=lambda a, b: torch.sign(a - b), kink=KINK),
    elementwise("i0", torch.special.i0, sf.i0, "modified Bessel function I0(x)",
                aliases=("special.i0",)),
    elementwise("i1", torch.special.i1, sf.i1, "modified Bessel function I1(x)",
                aliases=("special.i1",)),
    elementwise("i0e", torch.special.i0e, sf.i0e, "exp(-|x|) I0(x) (kink at 0)",
                branch=torch.sign, kink=KINK, aliases=("special.i0e",)),
    elementwise("i1e", torch.special.i1e, sf.i1e, "exp(-|x|) I1(x)",
                aliases=("special.i1e",)),
    elementwise("erfcx", torch.special.erfcx, sf.erfcx, "exp(x**2) erfc(x), scaled",
                aliases=("special.erfcx",)),
    elementwise("log_ndtr", torch.special.log_ndtr, sf.log_ndtr, "log of the standard normal "
                "CDF", aliases=("special.log_ndtr",)),
    elementwise("polygamma", _polygamma_fn, _polygamma_sym, "polygamma(n, x): the n-th "
                "derivative of digamma (poles at 0, -1, ...)", domain=(0.5, 3.0),
                branch=lambda x, n: pole_left(x), kink=POLE, signature=signature("n: int, input"),
                aliases=("special.polygamma",)),
]
ROWS = NAME_ROWS + SPECIAL_ROWS

# The family `gradscope ops` lists these rows under (expr/ops/__init__.py reads it).
BY_FAMILY = {"math": ROWS}
