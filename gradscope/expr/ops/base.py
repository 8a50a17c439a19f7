"""The row type of the op table and the helpers that build rows.

One `Op` says everything gradscope knows about a function: how torch computes it, its sympy form
(whose derivative follows torch's convention at kinks), where its kinks, jumps or poles are, how
it folds constants, how a reduction takes in one changed element, which `grad_fn` nodes torch
builds for it and what gradient-flow analysis should call them. Nothing outside `expr/ops/`
names an op; everything else reads these fields.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

Tensor = torch.Tensor
ELEMENTWISE, REDUCTION, STRUCTURAL, COMPARE = "elementwise", "reduction", "structural", "compare"
KINK, JUMP, POLE = "kink", "jump", "pole or edge of the domain"
VANISHES, SATURATES, PASSES = "vanishing", "saturation", "passes"
MAX_EXPONENT = 1000.0  # constant exponents are bounded so constants never overflow


@dataclass(frozen=True)
class Op:
    name: str
    kind: str
    arity: tuple[int, int]
    torch: Callable[..., Tensor]
    summary: str
    sympy: Callable[..., Any] | None = None
    # A piece id per element that changes exactly when a kink, jump or pole is crossed, and
    # what crossing it means (KINK, JUMP or POLE).
    branch: Callable[..., Tensor] | None = None
    kink: str | None = None
    # Which argument positions can move an element across the kink, given the arguments'
    # constant values (None where not constant): x**2 cannot kink, x/3 cannot. None: all.
    kink_args: Callable[[tuple[float | None, ...]], tuple[int, ...]] | None = None
    domain: tuple[float, float] | None = None
    symbol: str | None = None  # operator spelling, for operators
    takes_dim: bool = False
    # Argument positions torch takes as Python numbers when they are constants: its kernels
    # special-case them (torch.pow(x, 2) squares; with a 0-d tensor exponent it runs the
    # generic pow, twenty times slower).
    scalar_args: tuple[int, ...] = ()
    exponent_arg: int | None = None  # a constant here is bounded by MAX_EXPONENT
    condition_arg: int | None = None  # this argument is a comparison (where's condition)
    fold: Callable[..., float] | None = None  # the op on Python numbers (constant folding)
    # Reductions: the reduced value r with one element changed from old to new (n reduced
    # over), without recomputing; `extreme` +1/-1 for max/min (best and second best).
    incremental: Callable[[Tensor, Tensor, Tensor, int], Tensor] | None = None
    extreme: int = 0
    # Structural rows: closed-form adjoints on plain tensors, never autograd.
    vjp: Callable[..., list[Tensor]] | None = None
    jvp: Callable[..., Tensor] | None = None
    vjp_formula: Callable[..., list[Any]] | None = None
    # Gradient-flow analysis: torch's grad_fn names for this op (without the trailing digits),
    # what it does to the gradient (VANISHES, SATURATES, PASSES) and what to suggest.
    grad_fns: tuple[str, ...] = ()
    flow: str | None = None
    hint: str | None = None
    expression: bool = True  # callable in expressions (False: known to flow analysis only)

    @property
    def elementwise(self) -> bool:
        return self.kind in (ELEMENTWISE, COMPARE)

    @property
    def vanishing(self) -> bool:
        """The gradient is zero almost everywhere (piecewise constant)."""
        return self.flow == VANISHES

    def kinky_args(self, constants: tuple[float | None, ...]) -> tuple[int, ...]:
        """The argument positions whose dependence on an input can cross the kink."""
        if self.kink_args is None:
            return tuple(range(len(constants)))
        return self.kink_args(constants)


def elementwise(name: str, fn: Callable[..., Tensor], sym: Callable[..., Any], summary: str,
                arity: int = 1, **kw: Any) -> Op:
    return Op(name, ELEMENTWISE, (arity, arity), fn, summary, sympy=sym, **kw)


def straight_through(op: str) -> str:
    """The straight-through estimator of a piecewise-constant tensor method."""
    return f"x + (x.{op}() - x).detach()"


def bounded_pow(a: float, b: float) -> float:
    if abs(b) > MAX_EXPONENT:
        raise OverflowError
    return float(math.pow(a, b))


def whole_nonnegative(value: float | None) -> bool:
    """A constant whole number >= 0 (x**2 is smooth everywhere)."""
    return value is not None and value == value and value >= 0 and float(value).is_integer()
