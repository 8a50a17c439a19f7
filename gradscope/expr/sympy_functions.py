"""Sympy functions whose derivatives follow torch's conventions, and how to evaluate them in torch.

sympy's own `floor`, `sign`, `Abs`, `Max`, `Heaviside` differentiate to unevaluated Derivatives,
DiracDeltas or 1/2-at-zero steps, none of which is what torch's autograd does. Each class here
carries `torch_impl` (its numeric value) and `fdiff` (its derivative in torch's convention), so the
symbolic engine agrees with autograd everywhere torch defines a gradient, kinks included.
Class names are lower case because sympy prints `func.__name__`: formulas read `round(x)`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import sympy as sp
import torch


class TorchFunction(sp.Function):
    """A sympy function with a torch implementation; subclasses set `torch_impl` and `fdiff`."""

    torch_impl: ClassVar[Callable[..., Any]]
    is_real = True


def _zero_derivative(self: sp.Function, argindex: int = 1) -> sp.Expr:
    return sp.S.Zero


def _make(name: str, nargs: int, torch_impl: Callable[..., Any],
          fdiff: Callable[..., sp.Expr]) -> type[TorchFunction]:
    # staticmethod keeps torch_impl from binding `self` when read off the class.
    return type(name, (TorchFunction,), {
        "nargs": nargs,
        "torch_impl": staticmethod(torch_impl),
        "fdiff": fdiff,
    })


def _step(x: torch.Tensor) -> torch.Tensor:
    return (x > 0).to(x.dtype)


def _half_step(x: torch.Tensor) -> torch.Tensor:
    return (x > 0).to(x.dtype) + 0.5 * (x == 0).to(x.dtype)


def _in_range(x: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
    return ((x >= lo) & (x <= hi)).to(x.dtype)


# Indicator functions: derivatives are zero (they only ever appear inside first derivatives).
step = _make("step", 1, _step, _zero_derivative)            # 1 where x > 0 (torch relu/clamp)
half_step = _make("half_step", 1, _half_step, _zero_derivative)  # 1/2 at 0: maximum's ties
in_range = _make("in_range", 3, _in_range, _zero_derivative)     # lo <= x <= hi (clamp)

# Piecewise-constant ops: torch's backward is exactly zero.
round_ = _make("round", 1, torch.round, _zero_derivative)
floor = _make("floor", 1, torch.floor, _zero_derivative)
ceil = _make("ceil", 1, torch.ceil, _zero_derivative)
trunc = _make("trunc", 1, torch.trunc, _zero_derivative)
sign = _make("sign", 1, torch.sign, _zero_derivative)
angle = _make("angle", 1, torch.angle, _zero_derivative)

frac = _make("frac", 1, torch.frac, lambda self, argindex=1: sp.S.One)
abs_ = _make("abs", 1, torch.abs, lambda self, argindex=1: sign(self.args[0]))
relu = _make("relu", 1, torch.relu, lambda self, argindex=1: step(self.args[0]))


def _sigmoid_fdiff(self: sp.Function, argindex: int = 1) -> sp.Expr:
    return self * (1 - self)


sigmoid = _make("sigmoid", 1, torch.sigmoid, _sigmoid_fdiff)
softplus = _make("softplus", 1, torch.nn.functional.softplus,
                 lambda self, argindex=1: sigmoid(self.args[0]))
expm1 = _make("expm1", 1, torch.expm1, lambda self, argindex=1: sp.exp(self.args[0]))
log1p = _make("log1p", 1, torch.log1p, lambda self, argindex=1: 1 / (1 + self.args[0]))
log2 = _make("log2", 1, torch.log2, lambda self, argindex=1: 1 / (self.args[0] * sp.log(2)))
log10 = _make("log10", 1, torch.log10, lambda self, argindex=1: 1 / (self.args[0] * sp.log(10)))


def _clamp_fdiff(self: sp.Function, argindex: int = 1) -> sp.Expr:
    x, lo, hi = self.args
    # torch (clamp_backward_min_max): d/dx is 1 on the closed interval; d/dlo where x < lo
    # and lo < hi; d/dhi where x > hi or hi < lo (then the result is hi whatever x is).
    if argindex == 1:
        return in_range(x, lo, hi)
    if argindex == 2:
        return step(lo - x) * step(hi - lo)
    above, crossed = step(x - hi), step(lo - hi)
    return above + crossed - above * crossed


def _clamp_torch(x: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
    return torch.clamp(x, lo, hi)


clamp = _make("clamp", 3, _clamp_torch, _clamp_fdiff)


def _maximum_fdiff(self: sp.Function, argindex: int = 1) -> sp.Expr:
    x, y = self.args
    return half_step(x - y) if argindex == 1 else half_step(y - x)


def _minimum_fdiff(self: sp.Function, argindex: int = 1) -> sp.Expr:
    x, y = self.args
    return half_step(y - x) if argindex == 1 else half_step(x - y)


maximum = _make("maximum", 2, torch.maximum, _maximum_fdiff)
minimum = _make("minimum", 2, torch.minimum, _minimum_fdiff)


def _pow_exponent_grad(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    # torch: d(x**y)/dy = x**y * log(x), defined as 0 where x == 0 and y >= 0
    value = torch.pow(x, y) * torch.log(x)
    return torch.where((x == 0) & (y >= 0), torch.zeros_like(value), value)


pow_exponent_grad = _make("pow_exponent_grad", 2, _pow_exponent_grad, _zero_derivative)


def _pow_fdiff(self: sp.Function, argindex: int = 1) -> sp.Expr:
    x, y = self.args
    # y*x**(y-1), not sympy's y*x**y/x, which is 0/0 at x == 0
    return y * power(x, y - 1) if argindex == 1 else pow_exponent_grad(x, y)


# x**y with a non-constant exponent (a constant exponent stays a plain sympy Pow).
power = _make("pow", 2, torch.pow, _pow_fdiff)



# ---------------------------------------------------------------- special functions
def _polygamma(n: int) -> Callable[[torch.Tensor], torch.Tensor]:
    return lambda x: torch.polygamma(n, x)


# digamma's derivatives, as far as a first derivative of an expression can reach
tetragamma = _make("tetragamma", 1, _polygamma(2), lambda self, argindex=1: pentagamma(
    self.args[0]))
pentagamma = _make("pentagamma", 1, _polygamma(3), lambda self, argindex=1: sp.polygamma(
    4, self.args[0]))
trigamma = _make("trigamma", 1, _polygamma(1), lambda self, argindex=1: tetragamma(
    self.args[0]))
digamma = _make("digamma", 1, torch.digamma, lambda self, argindex=1: trigamma(self.args[0]))
lgamma = _make("lgamma", 1, torch.lgamma, lambda self, argindex=1: digamma(self.args[0]))


def _xlogy_dx(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    # torch: d/dx xlogy(x, y) = xlogy(x != 0, y): 0 where x == 0, whatever y is
    return torch.xlogy((x != 0).to(y.dtype), y)


xlogy_dx = _make("xlogy_dx", 2, _xlogy_dx, _zero_derivative)
xlogy = _make("xlogy", 2, torch.xlogy, lambda self, argindex=1: xlogy_dx(*self.args)
              if argindex == 1 else self.args[0] / self.args[1])
logaddexp = _make("logaddexp", 2, torch.logaddexp, lambda self, argindex=1: sigmoid(
    self.args[0] - self.args[1]) if argindex == 1 else sigmoid(self.args[1] - self.args[0]))
hypot = _make("hypot", 2, torch.hypot, lambda self, argindex=1: self.args[argindex - 1] / self)


def _copysign_ratio(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    # torch: copysign(x, y) / x, and 0 where x == 0
    safe = torch.where(x == 0, torch.ones_like(x), x)
    return torch.where(x == 0, torch.zeros_like(x), torch.copysign(x, y) / safe)


copysign_ratio = _make("copysign_ratio", 2, _copysign_ratio, _zero_derivative)
copysign = _make("copysign", 2, torch.copysign, lambda self, argindex=1: copysign_ratio(
    *self.args) if argindex == 1 else sp.S.Zero)
fmod = _make("fmod", 2, torch.fmod, lambda self, argindex=1: sp.S.One if argindex == 1
             else -trunc(self.args[0] / self.args[1]))
remainder = _make("remainder", 2, torch.remainder, lambda self, argindex=1: sp.S.One
                  if argindex == 1 else -floor(self.args[0] / self.args[1]))


def _sinc_grad(x: torch.Tensor) -> torch.Tensor:
    # torch: (cos(pi x) - sinc(x)) / x, and 0 at x == 0
    safe = torch.where(x == 0, torch.ones_like(x), x)
    value = (torch.cos(torch.pi * x) - torch.sinc(x)) / safe
    return torch.where(x == 0, torch.zeros_like(x), value)


def _sinc_grad_fdiff(self: sp.Function, argindex: int = 1) -> sp.Expr:
    x = self.args[0]
    return (-sp.pi * sp.sin(sp.pi * x) - 2 * self) / x


sinc_grad = _make("sinc_grad", 1, _sinc_grad, _sinc_grad_fdiff)
sinc = _make("sinc", 1, torch.sinc, lambda self, argindex=1: sinc_grad(self.args[0]))


# ------------------------------------------- modified Bessel functions, erfcx, log_ndtr
def _at_zero(value: Callable[[torch.Tensor], torch.Tensor], limit: float
             ) -> Callable[[torch.Tensor], torch.Tensor]:
    """`value`, and its limit where x == 0 (a 0/0 there)."""
    def run(x: torch.Tensor) -> torch.Tensor:
        safe = torch.where(x == 0, torch.ones_like(x), x)
        return torch.where(x == 0, torch.full_like(x, limit), value(safe))
    return run


# d i1/dx = i0 - i1/x (1/2 at 0); d i1e/dx = i0e - i1e (sign(x) + 1/x) (1/2 at 0)
i1_dx = _make("i1_dx", 1, _at_zero(lambda x: torch.special.i0(x) - torch.special.i1(x) / x,
                                   0.5), _zero_derivative)
i1e_dx = _make("i1e_dx", 1, _at_zero(lambda x: torch.special.i0e(x) - torch.special.i1e(x) * (
    torch.sign(x) + 1 / x), 0.5), _zero_derivative)
i1 = _make("i1", 1, torch.special.i1, lambda self, argindex=1: i1_dx(self.args[0]))
i0 = _make("i0", 1, torch.special.i0, lambda self, argindex=1: i1(self.args[0]))
i1e = _make("i1e", 1, torch.special.i1e, lambda self, argindex=1: i1e_dx(self.args[0]))
i0e = _make("i0e", 1, torch.special.i0e, lambda self, argindex=1: i1e(self.args[0])
            - sign(self.args[0]) * i0e(self.args[0]))
erfcx = _make("erfcx", 1, torch.special.erfcx, lambda self, argindex=1: 2 * self.args[0] * self
              - 2 / sp.sqrt(sp.pi))
# d log_ndtr/dx = pdf / cdf, written exp(-x^2/2 - log_ndtr(x)) / sqrt(2 pi): no 0/0 far left
log_ndtr = _make("log_ndtr", 1, torch.special.log_ndtr, lambda self, argindex=1: sp.exp(
    -self.args[0] ** 2 / 2 - self) / sp.sqrt(2 * sp.pi))

_POLYGAMMA: dict[int, type[TorchFunction]] = {}


def polygamma(n: int) -> type[TorchFunction]:
    """polygamma(n, x) as a function of x, differentiating to polygamma(n + 1, x)."""
    if n not in _POLYGAMMA:
        _POLYGAMMA[n] = _make(f"polygamma{n}", 1, _polygamma(n),
                              lambda self, argindex=1: polygamma(n + 1)(self.args[0]))
    return _POLYGAMMA[n]

# fmax/fmin: torch passes a tie's gradient to the first argument (maximum splits it)
fmax = _make("fmax", 2, torch.fmax, lambda self, argindex=1: 1 - step(self.args[1] - self.args[0])
             if argindex == 1 else step(self.args[1] - self.args[0]))
fmin = _make("fmin", 2, torch.fmin, lambda self, argindex=1: 1 - step(self.args[0] - self.args[1])
             if argindex == 1 else step(self.args[0] - self.args[1]))

# gaussian_nll_loss clamps var under no_grad: the value clamped, the gradient passed as if not
clamp_min_passing = _make("clamp_min_passing", 2, lambda x, lo: torch.clamp(x, min=lo),
                          lambda self, argindex=1: sp.S.One if argindex == 1 else sp.S.Zero)
