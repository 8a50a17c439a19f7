"""Elementwise math beyond the textbook set: inverse hyperbolics, special functions, two-input
functions (xlogy, logaddexp, hypot, copysign, fmod, remainder) and unit conversions, each with
its sympy form in torch's convention, its domain and its jumps."""

from __future__ import annotations

import sympy as sp
import torch

from gradscope.expr import sympy_functions as sf
from gradscope.expr.ops.base import JUMP, POLE, Tensor, elementwise, signature

POSITIVE = (0.1, 2.0)
UNIT = (-0.9, 0.9)
ABOVE_ONE = (1.1, 3.0)
OPEN_UNIT = (0.05, 0.95)


def pole_left(x: Tensor) -> Tensor:
    # lgamma and digamma: smooth for x > 0, a pole at every integer <= 0
    return torch.where(x > 0, torch.ones_like(x), torch.floor(x))


def _logit(x: Tensor, eps: float | None = None) -> Tensor:
    return torch.logit(x, eps)


def _sympy_logit(x: sp.Expr, eps: float | None = None) -> sp.Expr:
    if eps is not None:  # torch clamps to [eps, 1 - eps]: no gradient outside
        x = sf.clamp(x, sp.Float(eps), sp.Float(1 - eps))
    return sp.log(x / (1 - x))


def _logit_branch(x: Tensor, eps: float | None = None) -> Tensor:
    if eps is None:
        return torch.where((x > 0) & (x < 1), torch.ones_like(x), torch.sign(x - 0.5) * 2)
    return torch.sign(x - eps) + 3 * torch.sign(x - (1 - eps))


def _quotient(fn):
    return lambda a, b: fn(a / b)


ROWS = [
    elementwise("acosh", torch.acosh, sp.acosh, "inverse hyperbolic cosine, x >= 1",
                domain=ABOVE_ONE, aliases=("arccosh",)),
    elementwise("asinh", torch.asinh, sp.asinh, "inverse hyperbolic sine",
                aliases=("arcsinh",)),
    elementwise("atanh", torch.atanh, sp.atanh, "inverse hyperbolic tangent, |x| < 1",
                domain=UNIT, aliases=("arctanh",)),
    elementwise("square", torch.square, lambda x: x**2, "x * x"),
    elementwise("rsqrt", torch.rsqrt, lambda x: x ** sp.Rational(-1, 2), "1 / sqrt(x), x > 0",
                domain=POSITIVE),
    elementwise("reciprocal", torch.reciprocal, lambda x: 1 / x, "1 / x (pole at 0)",
                branch=torch.sign, kink=POLE),
    elementwise("exp2", torch.exp2, lambda x: sp.Pow(2, x), "2 ** x",
                aliases=("special.exp2",)),
    elementwise("erfc", torch.erfc, sp.erfc, "complementary error function 1 - erf(x)"),
    elementwise("erfinv", torch.erfinv, sp.erfinv, "inverse error function, |x| < 1",
                domain=UNIT),
    elementwise("lgamma", torch.lgamma, sf.lgamma, "log |gamma(x)| (poles at 0, -1, -2, ...)",
                domain=(0.5, 3.0), branch=pole_left, kink=POLE, aliases=("special.gammaln",)),
    elementwise("digamma", torch.digamma, sf.digamma,
                "digamma(x) = d lgamma / dx (poles at 0, -1, ...)", domain=(0.5, 3.0),
                branch=pole_left, kink=POLE, aliases=("special.psi", "special.digamma")),
    elementwise("logit", _logit, _sympy_logit,
                "log(x / (1 - x)), 0 < x < 1; eps clamps x to [eps, 1 - eps]",
                domain=OPEN_UNIT, branch=_logit_branch, kink=POLE,
                signature=signature("input, eps: float = None")),
    elementwise("xlogy", torch.xlogy, sf.xlogy, "x * log(y), 0 where x == 0; y > 0", 2,
                domain=POSITIVE, aliases=("special.xlogy",)),
    elementwise("logaddexp", torch.logaddexp, sf.logaddexp, "log(exp(a) + exp(b))", 2),
    elementwise("hypot", torch.hypot, sf.hypot, "sqrt(a**2 + b**2)", 2),
    elementwise("copysign", torch.copysign, sf.copysign,
                "|a| with the sign of b (jumps where b changes sign)", 2,
                branch=lambda a, b: torch.sign(a) + 3 * torch.signbit(b), kink=JUMP),
    elementwise("fmod", torch.fmod, sf.fmod, "a - b * trunc(a / b) (jumps)", 2,
                branch=_quotient(torch.trunc), kink=JUMP),
    elementwise("remainder", torch.remainder, sf.remainder,
                "a - b * floor(a / b), Python's % (jumps)", 2,
                branch=_quotient(torch.floor), kink=JUMP),
    elementwise("sinc", torch.sinc, sf.sinc, "sin(pi x) / (pi x), 1 at 0",
                aliases=("special.sinc",)),
    elementwise("deg2rad", torch.deg2rad, lambda x: x * sp.pi / 180, "degrees to radians"),
    elementwise("rad2deg", torch.rad2deg, lambda x: x * 180 / sp.pi, "radians to degrees"),
]

# The family `gradscope ops` lists these rows under (expr/ops/__init__.py reads it).
BY_FAMILY = {"math": ROWS}
