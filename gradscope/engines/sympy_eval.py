"""Evaluate sympy expressions on torch tensors with a small table-driven walker.

Never `lambdify` (DESIGN.md): it maps Max/Min to reductions and fails on Heaviside, and it
would compile code from symbol names. The walker shares common subexpressions (`sympy.cse`),
so a block's value and all its derivatives cost one pass over each distinct subterm.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sympy as sp
import torch

from gradscope.expr.ops import SYMPY_TORCH
from gradscope.expr.sympy_functions import TorchFunction

_RELATIONS: dict[type, Callable[[Any, Any], Any]] = {
    sp.StrictLessThan: torch.lt, sp.LessThan: torch.le,
    sp.StrictGreaterThan: torch.gt, sp.GreaterThan: torch.ge,
}


class SympyEvaluator:
    """Evaluates several sympy expressions over one environment of tensors."""

    def __init__(self, env: Mapping[sp.Symbol, torch.Tensor], dtype: torch.dtype,
                 device: torch.device) -> None:
        self.env = dict(env)
        self.dtype, self.device = dtype, device
        self.memo: dict[sp.Basic, Any] = {}

    def evaluate(self, exprs: Sequence[sp.Expr]) -> list[torch.Tensor]:
        # fresh names per call: the memo must never mistake one call's subterm for another's
        self.calls = getattr(self, "calls", 0) + 1
        replacements, reduced = sp.cse(list(exprs), optimizations=None,
                                       symbols=sp.numbered_symbols(f"_cse{self.calls}_"))
        for sym, sub in replacements:
            self.env[sym] = self.node(sub)
        return [self.as_tensor(self.node(e)) for e in reduced]

    def as_tensor(self, value: Any) -> torch.Tensor:
        if isinstance(value, torch.Tensor):
            return value.to(self.dtype) if value.dtype == torch.bool else value
        return torch.tensor(float(value), dtype=self.dtype, device=self.device)

    def as_bool(self, value: Any) -> torch.Tensor:
        if isinstance(value, torch.Tensor):
            return value.bool()
        return torch.tensor(bool(value), device=self.device)

    def node(self, e: sp.Basic) -> Any:
        if e in self.memo:
            return self.memo[e]
        value = self._node(e)
        self.memo[e] = value
        return value

    def _node(self, e: sp.Basic) -> Any:
        if e.is_Symbol:
            return self.env[e]
        if e is sp.true:
            return True
        if e is sp.false:
            return False
        if e.is_Number or e in (sp.pi, sp.E):
            value = float(e)
            return value if math.isfinite(value) else torch.tensor(
                value, dtype=self.dtype, device=self.device)
        if e.is_Add:
            total: Any = 0.0
            for arg in e.args:
                total = total + self.node(arg)
            return total
        if e.is_Mul:
            prod: Any = 1.0
            for arg in e.args:
                prod = prod * self.node(arg)
            return prod
        if e.is_Pow:
            return self._pow(e)
        if isinstance(e, sp.Piecewise):
            return self._piecewise(e)
        if isinstance(e, sp.And | sp.Or):
            parts = [self.as_bool(self.node(a)) for a in e.args]
            combine = torch.logical_and if isinstance(e, sp.And) else torch.logical_or
            out = parts[0]
            for part in parts[1:]:
                out = combine(out, part)
            return out
        if isinstance(e, sp.Not):
            return torch.logical_not(self.as_bool(self.node(e.args[0])))
        if type(e) in _RELATIONS:
            a, b = (self.as_tensor(self.node(arg)) for arg in e.args)
            return _RELATIONS[type(e)](a, b)
        if isinstance(e, TorchFunction):
            args = [self.as_tensor(self.node(a)) for a in e.args]
            return type(e).torch_impl(*args)
        fn = SYMPY_TORCH.get(type(e))
        if fn is not None:
            args = [self.as_tensor(self.node(a)) for a in e.args]
            return fn(*args)
        raise NotImplementedError(f"no torch evaluation for sympy {type(e).__name__}")

    def _pow(self, e: sp.Pow) -> Any:
        base, exponent = e.args
        b = self.node(base)
        if exponent == -1:
            return 1.0 / b if not isinstance(b, torch.Tensor) else torch.reciprocal(b)
        if exponent == sp.Rational(1, 2):
            return torch.sqrt(self.as_tensor(b))
        if exponent == sp.Rational(-1, 2):
            return torch.rsqrt(self.as_tensor(b))
        if exponent.is_Integer and abs(int(exponent)) <= 64:
            return self.as_tensor(b) ** int(exponent)
        power = self.node(exponent)  # a Python number keeps torch's fast scalar-pow kernels
        return torch.pow(self.as_tensor(b), power if isinstance(power, float)
                         else self.as_tensor(power))

    def _piecewise(self, e: sp.Piecewise) -> Any:
        result: Any = None
        for value, cond in reversed(e.args):
            v = self.as_tensor(self.node(value))
            if cond is sp.true:
                result = v
                continue
            c = self.node(cond)
            c = c if isinstance(c, torch.Tensor) else torch.tensor(bool(c), device=self.device)
            result = torch.where(c, v, result if result is not None else torch.full_like(
                v, math.nan))
        return result
