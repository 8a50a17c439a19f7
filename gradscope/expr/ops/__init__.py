"""The op table: one row per expression function or operator, the single source of truth.

Rows live in one module per family of torch's API (`_MODULES` below: elementwise.py,
reductions.py, linalg.py, conv_nd.py, …; `flow_only.py` holds torch ops that only
gradient-flow analysis meets); each module says which family its rows belong to
(`BY_FAMILY`), and `base.Op` documents the fields. Adding a function is adding one row to one
of those lists. Everything else (parser, torch and sympy builders, engines, diagnostics, help)
reads the lookups below.
"""

from __future__ import annotations

import math

import sympy as sp
import torch

from gradscope.expr.ops import (
    accumulate,
    activations,
    blas,
    composite,
    conv,
    conv_nd,
    elementwise,
    factor,
    flow_only,
    indexing,
    layers,
    linalg,
    losses,
    masked,
    matrix,
    numerics,
    order,
    parts,
    reductions,
    resample,
    sampling,
    shape,
    special,
    spelled,
    structural,
    variants,
)
from gradscope.expr.ops.base import (
    COMPARE,
    ELEMENTWISE,
    JUMP,
    KINK,
    MAX_EXPONENT,
    OPTIONAL,
    PASSES,
    POLE,
    REDUCTION,
    REQUIRED,
    SATURATES,
    STRUCTURAL,
    TENSOR,
    TENSORS,
    VANISHES,
    Build,
    Op,
    OpParam,
)

# The family modules, each with its rows by family (`BY_FAMILY`); `flow_only` is not among them
# (its rows are torch ops only gradient-flow analysis meets, never callable in expressions).
_MODULES = (elementwise, special, activations, reductions, structural, shape, linalg,
            composite, conv, blas, spelled, parts, order, indexing, accumulate, variants,
            resample, layers, losses, matrix, masked, conv_nd, numerics, factor, sampling)
_ROWS: list[Op] = [op for module in _MODULES for rows in module.BY_FAMILY.values()
                   for op in rows]

# Each row's family, as `gradscope ops` and the README group them: the one its module declares.
FAMILIES: dict[str, str] = {op.name: family for module in _MODULES
                            for family, rows in module.BY_FAMILY.items() for op in rows}

# Every op an expression can use, by name.
OPS: dict[str, Op] = {op.name: op for op in _ROWS}

# Functions callable by name in expressions (operators are spelled with their symbols and
# their aliases: `a + b`, `torch.add(a, b)`; pow is both), and their other names.
FUNCTIONS: dict[str, Op] = {
    name: op for name, op in OPS.items()
    if (op.symbol is None or name == "pow") and op.expression
}
FUNCTIONS.update({alias: op for op in _ROWS for alias in op.aliases})
# Tensor methods: every function name torch also has as a method (`x.sum(1)`, `x.exp()`),
# and the rows' own method names (`x.t()`, `x.view(...)`); where() is no method: torch's
# `x.where(c, y)` puts x second.
METHODS: dict[str, Op] = {
    name: op for name, op in FUNCTIONS.items()
    if "." not in name and hasattr(torch.Tensor, name) and op.condition_arg is None
}
METHODS.update({m: op for op in _ROWS for m in op.methods})
# Attributes that are ops: `x.T`, `x.mT` (rows whose symbol is the attribute).
ATTRIBUTES = {op.symbol[1:]: op.name for op in _ROWS if op.symbol and op.symbol[0] == "."}
# The module paths a function may be spelled with, longest first; names under the roots are
# modules, never tensors.
MODULES = ("torch.nn.functional.", "torch.special.", "nn.functional.", "special.", "torch.",
           "F.")
MODULE_ROOTS = ("torch", "F", "nn")
# Python's ast operator class names → row names, from the rows' symbols.
_AST_BINARY = {"+": "Add", "-": "Sub", "*": "Mult", "/": "Div", "**": "Pow", "@": "MatMult"}
_AST_UNARY = {"-": "USub", "+": "UAdd"}
_AST_COMPARE = {"<": "Lt", "<=": "LtE", ">": "Gt", ">=": "GtE"}
BINARY = {_AST_BINARY[op.symbol]: op.name for op in _ROWS
          if op.symbol in _AST_BINARY and op.arity == (2, 2) and op.kind != COMPARE}
UNARY = {_AST_UNARY[op.symbol]: op.name for op in _ROWS
         if op.symbol in _AST_UNARY and op.arity == (1, 1)}
COMPARISONS = {_AST_COMPARE[op.symbol]: op.name for op in _ROWS if op.kind == COMPARE}
CONSTANTS = {"pi": math.pi, "e": math.e}
# torch functions that draw random numbers: refused with the reason (two calls at nearby points
# draw differently, so finite differences measure the noise) and the way to check them
RANDOM = frozenset({
    "dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout",
    "bernoulli", "multinomial", "normal", "poisson", "rand", "rand_like", "randn",
    "randn_like", "randint", "randint_like", "randperm", "rrelu", "gumbel_softmax",
    "native_dropout", "fractional_max_pool2d", "fractional_max_pool3d"})

# sympy's own functions the rows use → the torch function that evaluates them (the symbolic
# engine's evaluator reads this; gradscope's own sympy functions carry their torch form).
SYMPY_TORCH = {op.sympy: op.torch for op in _ROWS
               if isinstance(op.sympy, type) and issubclass(op.sympy, sp.Function)
               and not hasattr(op.sympy, "torch_impl")}

# Every row, flow-only ones included, by name; and by torch grad_fn name (without trailing
# digits): the row gradient-flow analysis knows a backward node by.
KNOWN: dict[str, Op] = {op.name: op for op in _ROWS + flow_only.ROWS}
BY_GRAD_FN: dict[str, Op] = {fn: op for op in KNOWN.values() for fn in op.grad_fns}

__all__ = [
    "ATTRIBUTES",
    "BINARY",
    "BY_GRAD_FN",
    "COMPARE",
    "COMPARISONS",
    "CONSTANTS",
    "ELEMENTWISE",
    "FAMILIES",
    "FUNCTIONS",
    "JUMP",
    "KINK",
    "KNOWN",
    "MAX_EXPONENT",
    "METHODS",
    "MODULES",
    "MODULE_ROOTS",
    "OPS",
    "OPTIONAL",
    "PASSES",
    "POLE",
    "RANDOM",
    "REDUCTION",
    "REQUIRED",
    "SATURATES",
    "STRUCTURAL",
    "TENSOR",
    "TENSORS",
    "UNARY",
    "VANISHES",
    "Build",
    "Op",
    "OpParam",
]
