"""Activation functions as torch.nn.functional has them, keyword names included: the sympy
form follows torch's choice of derivative at every kink (torch's backward formulas say which
side a boundary point belongs to), and each piecewise one marks its kinks and saturation."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sympy as sp
import torch
import torch.nn.functional as F

from gradscope.expr import sympy_functions as sf
from gradscope.expr.ops.base import (
    JUMP,
    KINK,
    SATURATES,
    STRUCTURAL,
    Op,
    Tensor,
    elementwise,
    signature,
)

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def _pw(*pieces: tuple[Any, Any]) -> sp.Piecewise:
    return sp.Piecewise(*pieces)


def _gelu(x: sp.Expr, approximate: str = "none") -> sp.Expr:
    if approximate == "tanh":
        inner = sp.sqrt(2 / sp.pi) * (x + sp.Float(0.044715) * x**3)
        return x * (1 + sp.tanh(inner)) / 2
    return x * (1 + sp.erf(x / sp.sqrt(2))) / 2


def _elu(x: sp.Expr, alpha: float = 1.0) -> sp.Expr:
    return _pw((x, x > 0), (alpha * sf.expm1(x), True))


def _celu(x: sp.Expr, alpha: float = 1.0) -> sp.Expr:
    return _pw((x, x > 0), (alpha * sf.expm1(x / alpha), True))


def _hardtanh(x: sp.Expr, min_val: float = -1.0, max_val: float = 1.0) -> sp.Expr:
    # torch: gradient 1 strictly inside (min_val, max_val), 0 at and beyond the ends
    return _pw((min_val, x <= min_val), (x, x < max_val), (max_val, True))


def _range_branch(lo: float, hi: float) -> Callable[[Tensor], Tensor]:
    return lambda x, *a, **k: torch.sign(x - lo) + 3 * torch.sign(x - hi)


def _params_branch(lo_name: str, hi_name: str, lo: float, hi: float,
                   negate: bool = False) -> Callable[..., Tensor]:
    def branch(x: Tensor, **p: Any) -> Tensor:
        a = p.get(lo_name, lo)
        b = p.get(hi_name, hi)
        a = -b if negate else a
        return torch.sign(x - a) + 3 * torch.sign(x - b)
    return branch


def _sign_branch(x: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    return torch.sign(x)


def _threshold_branch(x: Tensor, threshold: float, value: float) -> Tensor:
    return torch.sign(x - threshold)


def _prelu_vjp(g: Tensor, out: Tensor, args: Sequence[Tensor], p: dict) -> list[Tensor]:
    x, w = args
    wide = _channel(w, x)
    gx = g * torch.where(x > 0, torch.ones_like(x), wide)
    gw = g * torch.where(x > 0, torch.zeros_like(x), x)
    if w.numel() == 1:
        return [gx, gw.sum().reshape(w.shape)]
    dims = [d for d in range(x.ndim) if d != (1 if x.ndim > 1 else 0)]
    return [gx, gw.sum(dims).reshape(w.shape)]


def _prelu_jvp(ts: Sequence[Tensor], out: Tensor, args: Sequence[Tensor], p: dict) -> Tensor:
    (x, w), (tx, tw) = args, ts
    wide, twide = _channel(w, x), _channel(tw.expand_as(w), x)
    return torch.where(x > 0, tx, wide * tx + twide * x)


def _channel(w: Tensor, x: Tensor) -> Tensor:
    """prelu's weight laid along x's channel dim (dim 1, or 0 for a 1-D input)."""
    if w.numel() == 1:
        return w.reshape(())
    shape = [1] * x.ndim
    shape[1 if x.ndim > 1 else 0] = w.numel()
    return w.reshape(shape)


def _glu_vjp(g: Tensor, out: Tensor, args: Sequence[Tensor], p: dict) -> list[Tensor]:
    (x,) = args
    a, b = x.chunk(2, p["dim"])
    s = torch.sigmoid(b)
    return [torch.cat([g * s, g * a * s * (1 - s)], p["dim"])]


def _glu_jvp(ts: Sequence[Tensor], out: Tensor, args: Sequence[Tensor], p: dict) -> Tensor:
    (x,), (t,) = args, ts
    a, b = x.chunk(2, p["dim"])
    ta, tb = t.expand_as(x).chunk(2, p["dim"])
    s = torch.sigmoid(b)
    return ta * s + a * s * (1 - s) * tb


RELU6_HINT = "relu6 passes no gradient below 0 or above 6"
HARDTANH_HINT = "hardtanh passes no gradient outside [min_val, max_val]; consider tanh"
SLOPE = signature("input, negative_slope: float = 0.01")
ALPHA = signature("input, alpha: float = 1.0")
LAMBD = signature("input, lambd: float = 0.5")

ROWS = [
    elementwise("gelu", F.gelu, _gelu, "x * Phi(x); approximate='tanh' for the tanh form",
                signature=signature("input, approximate: str = 'none'",
                                    approximate=("none", "tanh"))),
    elementwise("silu", F.silu, lambda x: x * sf.sigmoid(x), "x * sigmoid(x) (swish)"),
    elementwise("mish", F.mish, lambda x: x * sp.tanh(sf.softplus(x)),
                "x * tanh(softplus(x))"),
    elementwise("elu", F.elu, _elu, "x > 0: x, else alpha * (exp(x) - 1)", signature=ALPHA,
                branch=_sign_branch, kink=KINK),
    elementwise("selu", F.selu, lambda x: SELU_SCALE * _elu(x, SELU_ALPHA),
                "scale * elu(x, alpha) with the self-normalising constants",
                branch=_sign_branch, kink=KINK),
    elementwise("celu", F.celu, _celu, "x > 0: x, else alpha * (exp(x / alpha) - 1)",
                signature=ALPHA, branch=_sign_branch, kink=KINK),
    elementwise("leaky_relu", F.leaky_relu,
                lambda x, negative_slope=0.01: _pw((x, x > 0), (negative_slope * x, True)),
                "x > 0: x, else negative_slope * x", signature=SLOPE, branch=_sign_branch,
                kink=KINK),
    elementwise("relu6", F.relu6, lambda x: _hardtanh(x, 0.0, 6.0), "min(max(x, 0), 6)",
                branch=_range_branch(0.0, 6.0), kink=KINK, flow=SATURATES, hint=RELU6_HINT,
                grad_fns=()),
    elementwise("hardtanh", F.hardtanh, _hardtanh, "clamp(x, min_val, max_val)",
                signature=signature("input, min_val: float = -1.0, max_val: float = 1.0"),
                branch=_params_branch("min_val", "max_val", -1.0, 1.0), kink=KINK,
                flow=SATURATES, hint=HARDTANH_HINT, grad_fns=("HardtanhBackward",)),
    elementwise("hardsigmoid", F.hardsigmoid,
                lambda x: _pw((0, x <= -3), (x / 6 + sp.Rational(1, 2), x < 3), (1, True)),
                "relu6(x + 3) / 6", branch=_range_branch(-3.0, 3.0), kink=KINK),
    elementwise("hardswish", F.hardswish,
                lambda x: _pw((0, x < -3), (x * (x + 3) / 6, x <= 3), (x, True)),
                "x * relu6(x + 3) / 6", branch=_range_branch(-3.0, 3.0), kink=KINK),
    elementwise("softsign", F.softsign, lambda x: x / (1 + sf.abs_(x)), "x / (1 + |x|)"),
    elementwise("logsigmoid", F.logsigmoid, lambda x: -sf.softplus(-x), "log(sigmoid(x))"),
    elementwise("tanhshrink", F.tanhshrink, lambda x: x - sp.tanh(x), "x - tanh(x)"),
    elementwise("softshrink", F.softshrink,
                lambda x, lambd=0.5: _pw((x - lambd, x > lambd), (x + lambd, x < -lambd),
                                         (0, True)),
                "x -+ lambd outside [-lambd, lambd], 0 inside", signature=LAMBD,
                branch=_params_branch("lambd", "lambd", 0.5, 0.5, negate=True), kink=KINK),
    elementwise("hardshrink", F.hardshrink,
                lambda x, lambd=0.5: _pw((x, x > lambd), (x, x < -lambd), (0, True)),
                "x outside [-lambd, lambd], 0 inside (jumps)", signature=LAMBD,
                branch=_params_branch("lambd", "lambd", 0.5, 0.5, negate=True), kink=JUMP),
    elementwise("threshold", F.threshold,
                lambda x, threshold, value: _pw((x, x > threshold), (value, True)),
                "x where x > threshold, else value (jumps)",
                signature=signature("input, threshold: float, value: float"),
                branch=_threshold_branch, kink=JUMP, flow=SATURATES,
                grad_fns=("ThresholdBackward",),
                hint="threshold passes no gradient below the threshold"),
    elementwise("softplus", F.softplus,
                lambda x, beta=1.0, threshold=20.0: _pw(
                    (x, x * beta > threshold), (sf.softplus(beta * x) / beta, True)),
                "log(1 + exp(beta x)) / beta (x past threshold / beta)",
                signature=signature("input, beta: float = 1.0, threshold: float = 20.0")),
    Op("prelu", STRUCTURAL, (2, 2), F.prelu, "x > 0: x, else weight * x (weight per channel)",
       vjp=_prelu_vjp, jvp=_prelu_jvp, branch=lambda x, w: torch.sign(x), kink=KINK,
       signature=signature("input, weight")),
    Op("glu", STRUCTURAL, (1, 1), F.glu, "a * sigmoid(b), a and b the halves of dim",
       vjp=_glu_vjp, jvp=_glu_jvp, signature=signature("input, dim: dim = -1")),
]

# The family `gradscope ops` lists these rows under (expr/ops/__init__.py reads it).
BY_FAMILY = {"activation": ROWS}
