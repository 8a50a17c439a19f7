"""The op table: one row per expression function or operator, the single source of truth.

A row says, side by side (micrograd-style): how torch computes it, its sympy form (whose
derivative follows torch's convention at kinks), where its kinks and jumps are (`branch`: a
piece id that changes exactly when a kink, jump or pole is crossed), whether its gradient
vanishes almost everywhere, and the domain its inputs should be drawn from by default.

Rows of kind `reduction`/`structural` are not elementwise; for them the symbolic engine uses the
row's closed-form adjoints (`vjp`, `jvp`) written with plain tensor ops, never autograd.
Adding a function is adding one row.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sympy as sp
import torch

from gradscope.expr import sympy_functions as sf
from gradscope.tensors import expand_reduced, sum_to_shape

Tensor = torch.Tensor
ELEMENTWISE, REDUCTION, STRUCTURAL, COMPARE = "elementwise", "reduction", "structural", "compare"


@dataclass(frozen=True)
class Op:
    name: str
    kind: str
    arity: tuple[int, int]
    torch: Callable[..., Tensor]
    summary: str
    sympy: Callable[..., Any] | None = None
    branch: Callable[..., Tensor] | None = None
    vanishing: bool = False
    domain: tuple[float, float] | None = None
    symbol: str | None = None  # operator spelling, for operators
    takes_dim: bool = False
    # Argument positions torch takes as Python numbers when they are constants: its kernels
    # special-case them (torch.pow(x, 2) squares; with a 0-d tensor exponent it runs the
    # generic pow, twenty times slower).
    scalar_args: tuple[int, ...] = ()
    # Structural rows only: closed-form adjoints on plain tensors.
    vjp: Callable[..., list[Tensor]] | None = None
    jvp: Callable[..., Tensor] | None = None
    vjp_formula: Callable[..., list[Any]] | None = None

    @property
    def elementwise(self) -> bool:
        return self.kind in (ELEMENTWISE, COMPARE)


# ---------------------------------------------------------------- reductions: forward & adjoints
def _count(x: Tensor, dim: int | None) -> int:
    return x.numel() if dim is None else x.shape[dim]


def _sum(x: Tensor, dim: int | None = None) -> Tensor:
    return x.sum() if dim is None else x.sum(dim)


def _mean(x: Tensor, dim: int | None = None) -> Tensor:
    return x.mean() if dim is None else x.mean(dim)


def _prod(x: Tensor, dim: int | None = None) -> Tensor:
    return x.prod() if dim is None else x.prod(dim)


def _amax(x: Tensor, dim: int | None = None) -> Tensor:
    # amax spreads the gradient over ties, as torch.max() without dim does.
    return x.amax() if dim is None else x.amax(dim)


def _amin(x: Tensor, dim: int | None = None) -> Tensor:
    return x.amin() if dim is None else x.amin(dim)


def _norm(x: Tensor, dim: int | None = None) -> Tensor:
    return torch.linalg.vector_norm(x, dim=dim)


def _logsumexp(x: Tensor, dim: int | None = None) -> Tensor:
    return x.reshape(-1).logsumexp(0) if dim is None else x.logsumexp(dim)


def _softmax(x: Tensor, dim: int | None = None) -> Tensor:
    return torch.softmax(x, -1 if dim is None else dim)


def _prod_except(x: Tensor, dim: int | None) -> Tensor:
    """Product of all other elements along dim, without dividing (exact at zeros)."""
    if dim is None:
        return _prod_except(x.reshape(-1), 0).reshape(x.shape)
    n = x.shape[dim]
    ones = torch.ones_like(x.narrow(dim, 0, 1))
    left = torch.cat([ones, x.narrow(dim, 0, n - 1)], dim).cumprod(dim)
    right = torch.cat([x.narrow(dim, 1, n - 1), ones], dim).flip(dim).cumprod(dim).flip(dim)
    return left * right


def _tie_share(x: Tensor, out: Tensor, dim: int | None) -> Tensor:
    mask = (x == expand_reduced(out, x, dim)).to(x.dtype)
    total = mask.sum() if dim is None else mask.sum(dim, keepdim=True)
    return mask / total


def _safe_div(a: Tensor, b: Tensor) -> Tensor:
    return torch.where(b == 0, torch.zeros_like(a), a / torch.where(b == 0, 1, b))


def _reduction_vjp(local: Callable[[Tensor, Tensor, int | None], Tensor]) -> Callable:
    def vjp(g: Tensor, out: Tensor, args: Sequence[Tensor], dim: int | None) -> list[Tensor]:
        (x,) = args
        return [expand_reduced(g, x, dim) * local(x, out, dim)]
    return vjp


def _reduction_jvp(local: Callable[[Tensor, Tensor, int | None], Tensor]) -> Callable:
    def jvp(ts: Sequence[Tensor], out: Tensor, args: Sequence[Tensor], dim: int | None) -> Tensor:
        (x,), (t,) = args, ts
        return _sum(t.expand_as(x) * local(x, out, dim), dim)
    return jvp


_LOCAL: dict[str, Callable[[Tensor, Tensor, int | None], Tensor]] = {
    "sum": lambda x, out, dim: torch.ones_like(x),
    "mean": lambda x, out, dim: torch.full_like(x, 1.0 / _count(x, dim)),
    "prod": lambda x, out, dim: _prod_except(x, dim),
    "max": _tie_share,
    "min": _tie_share,
    "norm": lambda x, out, dim: _safe_div(x, expand_reduced(out, x, dim)),
    "logsumexp": lambda x, out, dim: torch.exp(x - expand_reduced(out, x, dim)),
}

_FN_SUM = sp.Function("sum")


def _formula_reduction(name: str) -> Callable[..., list[Any]]:
    def formula(g: Any, out: Any, args: Sequence[Any], n: int) -> list[Any]:
        (x,) = args
        local = {
            "sum": sp.S.One,
            "mean": sp.Rational(1, n) if n else sp.S.One,
            "prod": out / x,
            "max": sp.Function("max_share")(x),
            "min": sp.Function("min_share")(x),
            "norm": x / out,
            "logsumexp": sp.exp(x - out),
        }[name]
        return [g * local]
    return formula


def _softmax_vjp(g: Tensor, out: Tensor, args: Sequence[Tensor], dim: int | None) -> list[Tensor]:
    d = -1 if dim is None else dim
    return [out * (g - (g * out).sum(d, keepdim=True))]


def _softmax_jvp(ts: Sequence[Tensor], out: Tensor, args: Sequence[Tensor],
                 dim: int | None) -> Tensor:
    d = -1 if dim is None else dim
    t = ts[0].expand_as(out)
    return out * (t - (t * out).sum(d, keepdim=True))


def _softmax_formula(g: Any, out: Any, args: Sequence[Any], n: int) -> list[Any]:
    return [out * (g - _FN_SUM(g * out))]


def _dot(a: Tensor, b: Tensor) -> Tensor:
    return torch.dot(a, b)


def _dot_vjp(g: Tensor, out: Tensor, args: Sequence[Tensor], dim: int | None) -> list[Tensor]:
    a, b = args
    return [g * b, g * a]


def _dot_jvp(ts: Sequence[Tensor], out: Tensor, args: Sequence[Tensor], dim: int | None) -> Tensor:
    (a, b), (ta, tb) = args, ts
    return (ta.expand_as(a) * b).sum() + (a * tb.expand_as(b)).sum()


def _matmul_vjp(g: Tensor, out: Tensor, args: Sequence[Tensor], dim: int | None) -> list[Tensor]:
    a, b = args
    if a.ndim == 1 and b.ndim == 1:
        return [g * b, g * a]
    a2 = a.unsqueeze(0) if a.ndim == 1 else a
    b2 = b.unsqueeze(-1) if b.ndim == 1 else b
    g2 = g.unsqueeze(-2) if a.ndim == 1 else g
    g2 = g2.unsqueeze(-1) if b.ndim == 1 else g2
    ga = g2 @ b2.transpose(-1, -2)
    gb = a2.transpose(-1, -2) @ g2
    ga = ga.squeeze(-2) if a.ndim == 1 else ga
    gb = gb.squeeze(-1) if b.ndim == 1 else gb
    return [sum_to_shape(ga, a.shape), sum_to_shape(gb, b.shape)]


def _matmul_jvp(ts: Sequence[Tensor], out: Tensor, args: Sequence[Tensor],
                dim: int | None) -> Tensor:
    (a, b), (ta, tb) = args, ts
    return ta.expand_as(a) @ b + a @ tb.expand_as(b)


def _bilinear_formula(transpose: bool) -> Callable[..., list[Any]]:
    def formula(g: Any, out: Any, args: Sequence[Any], n: int) -> list[Any]:
        a, b = args
        if not transpose:
            return [g * b, g * a]
        mm, tr = sp.Function("matmul"), sp.Function("transpose")
        return [mm(g, tr(b)), mm(tr(a), g)]
    return formula


# ---------------------------------------------------------------- elementwise helpers
def _pow_branch(x: Tensor, y: Tensor) -> Tensor:
    # x**y is smooth where x > 0 or the exponent is a non-negative integer; elsewhere 0 is a pole
    # or the edge of the domain.
    if not isinstance(y, Tensor):  # a constant exponent (see Op.scalar_args)
        whole = y >= 0 and float(y).is_integer()
        smooth = (x > 0) | whole
    else:
        smooth = (x > 0) | ((y >= 0) & (y == torch.round(y)))
    return torch.where(smooth, torch.ones_like(x), torch.sign(x) - 2)


def _sympy_pow(x: Any, y: Any) -> Any:
    # A numeric exponent keeps sympy's Pow (formulas read 2*x*v); otherwise torch's convention.
    return sp.Pow(x, y) if getattr(y, "is_Number", False) else sf.power(x, y)


def _sign_diff(x: Tensor, y: Tensor) -> Tensor:
    return torch.sign(x - y)


def _clamp_branch(x: Tensor, lo: Tensor, hi: Tensor) -> Tensor:
    return torch.sign(x - lo) + torch.sign(x - hi)


def _atan2_branch(y: Tensor, x: Tensor) -> Tensor:
    # the jump of atan2 lies on the negative x axis
    return torch.where(x < 0, torch.sign(y), torch.zeros_like(y)) + 3 * (x == 0) * (y == 0)


def _where(cond: Tensor, a: Tensor, b: Tensor) -> Tensor:
    return torch.where(cond, a, b)


def _unit(x: Tensor) -> Tensor:
    return x


def _compare(fn: Callable[[Tensor, Tensor], Tensor], sym: Callable[[Any, Any], Any],
             name: str, symbol: str) -> Op:
    return Op(name, COMPARE, (2, 2), fn, f"comparison `{symbol}` (inside where only)",
              sympy=sym, branch=fn, symbol=symbol)


def _ew(name: str, fn: Callable[..., Tensor], sym: Callable[..., Any], summary: str,
        arity: int = 1, **kw: Any) -> Op:
    return Op(name, ELEMENTWISE, (arity, arity), fn, summary, sympy=sym, **kw)


def _red(name: str, fn: Callable[..., Tensor], summary: str, **kw: Any) -> Op:
    local = _LOCAL[name]
    return Op(name, REDUCTION, (1, 2), fn, summary, takes_dim=True,
              vjp=_reduction_vjp(local), jvp=_reduction_jvp(local),
              vjp_formula=_formula_reduction(name), **kw)


POSITIVE = (0.1, 2.0)
UNIT = (-0.9, 0.9)

_ROWS: list[Op] = [
    # operators
    _ew("add", torch.add, lambda a, b: a + b, "a + b", 2, symbol="+"),
    _ew("sub", torch.sub, lambda a, b: a - b, "a - b", 2, symbol="-"),
    _ew("mul", torch.mul, lambda a, b: a * b, "a * b", 2, symbol="*"),
    _ew("div", torch.div, lambda a, b: a / b, "a / b (pole where b = 0)", 2, symbol="/",
        branch=lambda a, b: torch.sign(b)),
    _ew("pow", torch.pow, _sympy_pow, "a ** b, pow(a, b)", 2, symbol="**", branch=_pow_branch,
        scalar_args=(1,)),
    _ew("neg", torch.neg, lambda a: -a, "-a", symbol="-"),
    _ew("pos", _unit, lambda a: a, "+a", symbol="+"),
    Op("matmul", STRUCTURAL, (2, 2), torch.matmul, "a @ b (matrix product)", symbol="@",
       vjp=_matmul_vjp, jvp=_matmul_jvp, vjp_formula=_bilinear_formula(True)),
    # smooth functions
    _ew("sin", torch.sin, sp.sin, "sine"),
    _ew("cos", torch.cos, sp.cos, "cosine"),
    _ew("tan", torch.tan, sp.tan, "tangent (poles at pi/2 + k*pi)",
        branch=lambda x: torch.floor(x / math.pi + 0.5)),
    _ew("asin", torch.asin, sp.asin, "arcsine, defined on [-1, 1]", domain=UNIT),
    _ew("acos", torch.acos, sp.acos, "arccosine, defined on [-1, 1]", domain=UNIT),
    _ew("atan", torch.atan, sp.atan, "arctangent"),
    _ew("sinh", torch.sinh, sp.sinh, "hyperbolic sine"),
    _ew("cosh", torch.cosh, sp.cosh, "hyperbolic cosine"),
    _ew("tanh", torch.tanh, sp.tanh, "hyperbolic tangent"),
    _ew("exp", torch.exp, sp.exp, "exponential"),
    _ew("expm1", torch.expm1, sf.expm1, "exp(x) - 1"),
    _ew("log", torch.log, sp.log, "natural logarithm, x > 0", domain=POSITIVE),
    _ew("log1p", torch.log1p, sf.log1p, "log(1 + x), x > -1", domain=(-0.9, 2.0)),
    _ew("log2", torch.log2, sf.log2, "base-2 logarithm, x > 0", domain=POSITIVE),
    _ew("log10", torch.log10, sf.log10, "base-10 logarithm, x > 0", domain=POSITIVE),
    _ew("sqrt", torch.sqrt, sp.sqrt, "square root, x >= 0", domain=POSITIVE),
    _ew("sigmoid", torch.sigmoid, sf.sigmoid, "logistic sigmoid"),
    _ew("softplus", torch.nn.functional.softplus, sf.softplus, "log(1 + exp(x))"),
    _ew("erf", torch.erf, sp.erf, "error function"),
    _ew("atan2", torch.atan2, sp.atan2, "atan2(y, x) (jump on the negative x axis)", 2,
        branch=_atan2_branch),
    # kinks
    _ew("abs", torch.abs, sf.abs_, "absolute value (kink at 0)", branch=torch.sign),
    _ew("relu", torch.relu, sf.relu, "max(x, 0) (kink at 0)", branch=torch.sign),
    _ew("clamp", sf.clamp.torch_impl, sf.clamp, "clamp(x, lo, hi) (kinks at lo and hi)", 3,
        branch=_clamp_branch),
    _ew("maximum", torch.maximum, sf.maximum, "elementwise maximum(x, y)", 2, branch=_sign_diff),
    _ew("minimum", torch.minimum, sf.minimum, "elementwise minimum(x, y)", 2, branch=_sign_diff),
    # piecewise constant: gradient zero almost everywhere, jumps in between
    _ew("sign", torch.sign, sf.sign, "sign (jump at 0, zero gradient)", branch=torch.sign,
        vanishing=True),
    _ew("round", torch.round, sf.round_, "round half to even (zero gradient)", branch=torch.round,
        vanishing=True),
    _ew("floor", torch.floor, sf.floor, "floor (zero gradient)", branch=torch.floor,
        vanishing=True),
    _ew("ceil", torch.ceil, sf.ceil, "ceil (zero gradient)", branch=torch.ceil, vanishing=True),
    _ew("trunc", torch.trunc, sf.trunc, "truncate toward 0 (zero gradient)", branch=torch.trunc,
        vanishing=True),
    _ew("frac", torch.frac, sf.frac, "x - trunc(x) (jumps at integers)", branch=torch.trunc),
    Op("where", ELEMENTWISE, (3, 3), _where, "where(cond, a, b), cond a comparison",
       sympy=lambda c, a, b: sp.Piecewise((a, c), (b, True))),
    _compare(torch.lt, sp.StrictLessThan, "lt", "<"),
    _compare(torch.le, sp.LessThan, "le", "<="),
    _compare(torch.gt, sp.StrictGreaterThan, "gt", ">"),
    _compare(torch.ge, sp.GreaterThan, "ge", ">="),
    # reductions (optional integer dim as second argument)
    _red("sum", _sum, "sum(x[, dim])"),
    _red("mean", _mean, "mean(x[, dim])"),
    _red("prod", _prod, "prod(x[, dim])"),
    _red("max", _amax, "max(x[, dim]) (ties share the gradient)",
         branch=lambda x, dim=None: _argbranch(x, dim, True)),
    _red("min", _amin, "min(x[, dim]) (ties share the gradient)",
         branch=lambda x, dim=None: _argbranch(x, dim, False)),
    _red("norm", _norm, "Euclidean norm(x[, dim])"),
    _red("logsumexp", _logsumexp, "logsumexp(x[, dim])"),
    Op("softmax", STRUCTURAL, (1, 2), _softmax, "softmax(x[, dim]) (dim defaults to -1)",
       takes_dim=True, vjp=_softmax_vjp, jvp=_softmax_jvp, vjp_formula=_softmax_formula),
    Op("dot", STRUCTURAL, (2, 2), _dot, "dot(a, b) of two 1-D tensors",
       vjp=_dot_vjp, jvp=_dot_jvp, vjp_formula=_bilinear_formula(False)),
]


def _argbranch(x: Tensor, dim: int | None, largest: bool) -> Tensor:
    flat = x.reshape(-1) if dim is None else x
    d = 0 if dim is None else dim
    return flat.argmax(d) if largest else flat.argmin(d)


OPS: dict[str, Op] = {op.name: op for op in _ROWS}

# Functions callable by name in expressions (operators are spelled with their symbols only,
# except pow, which is both).
FUNCTIONS: dict[str, Op] = {
    name: op for name, op in OPS.items()
    if op.symbol is None or name == "pow"
}
BINARY = {"Add": "add", "Sub": "sub", "Mult": "mul", "Div": "div", "Pow": "pow",
          "MatMult": "matmul"}
UNARY = {"USub": "neg", "UAdd": "pos"}
COMPARISONS = {"Lt": "lt", "LtE": "le", "Gt": "gt", "GtE": "ge"}
CONSTANTS = {"pi": math.pi, "e": math.e}
