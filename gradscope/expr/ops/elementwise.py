"""Elementwise rows: operators, smooth functions, kinks, piecewise-constant functions,
comparisons (inside `where` only)."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import sympy as sp
import torch

from gradscope.expr import sympy_functions as sf
from gradscope.expr.ops.base import (
    COMPARE,
    ELEMENTWISE,
    JUMP,
    KINK,
    PASSES,
    POLE,
    SATURATES,
    VANISHES,
    Op,
    Tensor,
    bounded_pow,
    elementwise,
    signature,
    straight_through,
    whole_nonnegative,
)

POSITIVE = (0.1, 2.0)
UNIT = (-0.9, 0.9)


def _pow_branch(x: Tensor, y: Tensor) -> Tensor:
    # x**y is smooth where x > 0 or the exponent is a non-negative integer; elsewhere 0 is a pole
    # or the edge of the domain.
    if not isinstance(y, Tensor):  # a constant exponent (see Op.scalar_args)
        whole = y >= 0 and float(y).is_integer()
        smooth = (x > 0) | whole
    else:
        smooth = (x > 0) | ((y >= 0) & (y == torch.round(y)))
    return torch.where(smooth, torch.ones_like(x), torch.sign(x) - 2)


def _pow_kink_args(constants: tuple[float | None, ...]) -> tuple[int, ...]:
    return () if whole_nonnegative(constants[1]) else (0, 1)


def _sympy_pow(x: Any, y: Any) -> Any:
    # A numeric exponent keeps sympy's Pow (formulas read 2*x*v); otherwise torch's convention.
    return sp.Pow(x, y) if getattr(y, "is_Number", False) else sf.power(x, y)


def _sign_diff(x: Tensor, y: Tensor) -> Tensor:
    return torch.sign(x - y)


def _clamp_branch(x: Tensor, lo: Tensor, hi: Tensor) -> Tensor:
    # one id per piece: x against lo, x against hi, and whether the bounds crossed (lo > hi:
    # the result is hi whatever x is)
    return torch.sign(x - lo) + 3 * torch.sign(x - hi) + 9 * torch.sign(hi - lo)


def _atan2_branch(y: Tensor, x: Tensor) -> Tensor:
    # the jump of atan2 lies on the negative x axis. A cut separates nothing, so some other
    # boundary must close the pieces: x = −π|y|, which no point of a grid or a list of
    # ordinary numbers lies on (x = 0, where inputs often are, would be a false kink)
    return torch.where(x < -math.pi * y.abs(), torch.sign(y), torch.zeros_like(y)) \
        + 3 * (x == 0) * (y == 0)


def _where(cond: Tensor, a: Tensor, b: Tensor) -> Tensor:
    return torch.where(cond, a, b)


def _unit(x: Tensor) -> Tensor:
    return x


def _compare(fn: Callable[[Tensor, Tensor], Tensor], sym: Callable[[Any, Any], Any],
             name: str, symbol: str) -> Op:
    return Op(name, COMPARE, (2, 2), fn, f"comparison `{symbol}` (inside where only)",
              sympy=sym, branch=fn, kink=JUMP, symbol=symbol)


def _piecewise_constant(name: str, fn: Callable[..., Tensor], sym: Any, summary: str,
                        grad_fns: tuple[str, ...], **kw: Any) -> Op:
    """round, floor, ...: zero gradient almost everywhere, jumps in between."""
    return elementwise(name, fn, sym, summary, branch=fn, kink=JUMP, flow=VANISHES,
                       grad_fns=grad_fns, hint=straight_through(name), **kw)


def _round(x: Tensor, decimals: int = 0) -> Tensor:
    # (torch.round(x) itself where it can: its backward node is RoundBackward0, the one users
    # see in their graphs; with decimals it is RoundBackward1)
    return torch.round(x) if decimals == 0 else torch.round(x, decimals=decimals)


def _sympy_round(x: Any, decimals: int = 0) -> Any:
    # as torch rounds to decimals: x scaled by a power of ten, rounded, scaled back
    if decimals == 0:
        return sf.round_(x)
    if decimals > 0:
        return sf.round_(x * sp.Integer(10) ** decimals) / sp.Integer(10) ** decimals
    return sf.round_(x / sp.Integer(10) ** -decimals) * sp.Integer(10) ** -decimals


def _div(a: Tensor, b: Tensor, rounding_mode: str | None = None) -> Tensor:
    return torch.div(a, b, rounding_mode=rounding_mode)


def _sympy_div(a: Any, b: Any, rounding_mode: str | None = None) -> Any:
    rounded = {"trunc": sf.trunc, "floor": sf.floor}.get(rounding_mode or "")
    return a / b if rounded is None else rounded(a / b)


def _div_branch(a: Tensor, b: Tensor, rounding_mode: str | None = None) -> Tensor:
    # the pole at b = 0; rounded, also the jump where the quotient crosses a whole number
    if rounding_mode is None:
        return torch.sign(b)
    return torch.sign(b) + 3 * _div(a, b, rounding_mode)


CLAMP_HINT = ("clamp passes no gradient outside [lo, hi]; if those elements should keep "
              "learning, use a straight-through clamp `x + (x.clamp(lo, hi) - x).detach()` or a "
              "smooth bound such as `lo + (hi - lo) * torch.sigmoid(x)`")
RELU_HINT = ("relu passes no gradient where its input is <= 0 (dead units); consider "
             "leaky_relu/gelu, a smaller learning rate or another initialisation")

OPERATORS = [
    elementwise("add", torch.add, lambda a, b: a + b, "a + b", 2, symbol="+", fold=operator.add,
                aliases=("add",)),
    elementwise("sub", torch.sub, lambda a, b: a - b, "a - b", 2, symbol="-", fold=operator.sub,
                aliases=("sub", "subtract")),
    elementwise("mul", torch.mul, lambda a, b: a * b, "a * b", 2, symbol="*", fold=operator.mul,
                aliases=("mul", "multiply")),
    elementwise("div", _div, _sympy_div, "a / b (pole where b = 0); rounding_mode 'trunc' or "
                "'floor' rounds the quotient (zero gradient, jumps)", 2, symbol="/",
                branch=_div_branch, kink=POLE, kink_args=lambda c: (1,),
                fold=operator.truediv, aliases=("div", "divide", "true_divide"),
                signature=signature("input, other, rounding_mode: str = None",
                                    rounding_mode=("trunc", "floor"))),
    elementwise("pow", torch.pow, _sympy_pow, "a ** b, pow(a, b)", 2, symbol="**",
                branch=_pow_branch, kink=POLE, kink_args=_pow_kink_args, scalar_args=(1,),
                exponent_arg=1, fold=bounded_pow),
    elementwise("neg", torch.neg, lambda a: -a, "-a", symbol="-", fold=operator.neg,
                aliases=("neg", "negative")),
    elementwise("pos", _unit, lambda a: a, "+a", symbol="+", fold=operator.pos),
]

SMOOTH = [
    elementwise("sin", torch.sin, sp.sin, "sine"),
    elementwise("cos", torch.cos, sp.cos, "cosine"),
    elementwise("tan", torch.tan, sp.tan, "tangent (poles at pi/2 + k*pi)",
                branch=lambda x: torch.floor(x / math.pi + 0.5), kink=POLE),
    elementwise("asin", torch.asin, sp.asin, "arcsine, defined on [-1, 1]", domain=UNIT,
                aliases=("arcsin",)),
    elementwise("acos", torch.acos, sp.acos, "arccosine, defined on [-1, 1]", domain=UNIT,
                aliases=("arccos",)),
    elementwise("atan", torch.atan, sp.atan, "arctangent", aliases=("arctan",)),
    elementwise("sinh", torch.sinh, sp.sinh, "hyperbolic sine"),
    elementwise("cosh", torch.cosh, sp.cosh, "hyperbolic cosine"),
    elementwise("tanh", torch.tanh, sp.tanh, "hyperbolic tangent"),
    elementwise("exp", torch.exp, sp.exp, "exponential"),
    elementwise("expm1", torch.expm1, sf.expm1, "exp(x) - 1", aliases=("special.expm1",)),
    elementwise("log", torch.log, sp.log, "natural logarithm, x > 0", domain=POSITIVE),
    elementwise("log1p", torch.log1p, sf.log1p, "log(1 + x), x > -1", domain=(-0.9, 2.0)),
    elementwise("log2", torch.log2, sf.log2, "base-2 logarithm, x > 0", domain=POSITIVE),
    elementwise("log10", torch.log10, sf.log10, "base-10 logarithm, x > 0", domain=POSITIVE),
    elementwise("sqrt", torch.sqrt, sp.sqrt, "square root, x >= 0", domain=POSITIVE),
    elementwise("sigmoid", torch.sigmoid, sf.sigmoid, "logistic sigmoid",
                aliases=("special.expit",)),
    elementwise("erf", torch.erf, sp.erf, "error function", aliases=("special.erf",)),
    elementwise("atan2", torch.atan2, sp.atan2, "atan2(y, x) (jump on the negative x axis)", 2,
                branch=_atan2_branch, kink=JUMP, aliases=("arctan2",)),
]

KINKS = [
    elementwise("abs", torch.abs, sf.abs_, "absolute value (kink at 0)", branch=torch.sign,
                kink=KINK, aliases=("absolute",)),
    elementwise("relu", torch.relu, sf.relu, "max(x, 0) (kink at 0)", branch=torch.sign,
                kink=KINK, grad_fns=("ReluBackward",), flow=SATURATES, hint=RELU_HINT),
    elementwise("clamp", sf.clamp.torch_impl, sf.clamp, "clamp(x, lo, hi) (kinks at lo and hi)",
                3, branch=_clamp_branch, kink=KINK, flow=SATURATES, hint=CLAMP_HINT,
                signature=signature("input, min = -inf, max = inf"), one_of=("min", "max"),
                aliases=("clip", "clamp_min"),
                methods=("clamp_min",),
                grad_fns=("ClampBackward", "ClampMinBackward", "ClampMaxBackward")),
    elementwise("maximum", torch.maximum, sf.maximum, "elementwise maximum(x, y)", 2,
                branch=_sign_diff, kink=KINK),
    elementwise("minimum", torch.minimum, sf.minimum, "elementwise minimum(x, y)", 2,
                branch=_sign_diff, kink=KINK),
]

PIECEWISE_CONSTANT = [
    _piecewise_constant("angle", torch.angle, sf.angle, "angle of a real number: 0 for x >= 0, "
                        "pi below (zero gradient)", ("AngleBackward",)),
    _piecewise_constant("sign", torch.sign, sf.sign, "sign (jump at 0, zero gradient)",
                        ("SignBackward", "SgnBackward")),
    _piecewise_constant("round", _round, _sympy_round, "round half to even, to `decimals` "
                        "places (zero gradient)", ("RoundBackward",),
                        signature=signature("input, decimals: int<400> = 0")),
    _piecewise_constant("floor", torch.floor, sf.floor, "floor (zero gradient)",
                        ("FloorBackward",)),
    _piecewise_constant("ceil", torch.ceil, sf.ceil, "ceil (zero gradient)", ("CeilBackward",)),
    _piecewise_constant("trunc", torch.trunc, sf.trunc, "truncate toward 0 (zero gradient)",
                        ("TruncBackward",)),
    elementwise("frac", torch.frac, sf.frac, "x - trunc(x) (jumps at integers)",
                branch=torch.trunc, kink=JUMP, grad_fns=("FracBackward",), flow=PASSES),
]

CONDITIONS = [
    Op("where", ELEMENTWISE, (3, 3), _where, "where(cond, a, b), cond a comparison",
       sympy=lambda c, a, b: sp.Piecewise((a, c), (b, True)), condition_arg=0,
       otherwise="masked_where",
       signature=signature("condition, input, other")),
    _compare(torch.lt, sp.StrictLessThan, "lt", "<"),
    _compare(torch.le, sp.LessThan, "le", "<="),
    _compare(torch.gt, sp.StrictGreaterThan, "gt", ">"),
    _compare(torch.ge, sp.GreaterThan, "ge", ">="),
]

ROWS = OPERATORS + SMOOTH + KINKS + PIECEWISE_CONSTANT + CONDITIONS

# The family `gradscope ops` lists these rows under (expr/ops/__init__.py reads it).
BY_FAMILY = {"math": ROWS}
