"""The symbolic engine: exact derivatives from sympy, evaluated vectorised in float64.

The IR is cut into *elementwise blocks*: maximal subtrees of elementwise ops, each a sympy
expression over one real symbol per leaf tensor (an input, or the result of a reduction or
structural op such as `sum`, `softmax`, `@`). Each block is differentiated once per leaf, so a
million-element input costs one symbolic derivative and one vectorised evaluation. Reductions and
structural ops are chained with their closed-form adjoints from the op table (plain tensor math,
never autograd). Broadcasting is undone explicitly (`sum_to_shape`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import sympy as sp
import torch

from gradscope import process
from gradscope.engines.sympy_eval import SympyEvaluator
from gradscope.expr import ir
from gradscope.expr.ops import OPS, Build, Op
from gradscope.expr.to_torch import evaluate
from gradscope.tensors import sum_to_shape

MAX_FORMULA = 400
MAX_FORMULA_OPS = 2000  # larger formulas are not printed (printing itself would be slow)
BUDGET_S = 10.0  # sympy work past this is abandoned: the engine is skipped with the reason


class BudgetExceeded(RuntimeError):
    """sympy took longer than its budget; the other two engines still give a verdict."""


@dataclass
class _Block:
    expr: sp.Expr
    shape: tuple[int, ...]
    value: torch.Tensor | None = None
    derivs: dict[sp.Symbol, torch.Tensor] = field(default_factory=dict)
    deriv_exprs: dict[sp.Symbol, sp.Expr] = field(default_factory=dict)


@dataclass
class _Opaque:
    op: Op
    symbol: sp.Symbol
    args: list[_Block]  # one per call argument
    names: tuple[str, ...]
    params: dict
    value: torch.Tensor | None = None

    def slots(self, values: list) -> list:
        return self.op.slots(values, self.names)


class SymbolicEngine:
    """Builds the blocks, evaluates forward values and all block derivatives once.

    `vjp(v)` and `jvp(t)` are then cheap tensor passes, so extra upstream vectors and Jacobian
    rows reuse the same derivatives.
    """

    def __init__(self, expr: ir.Expression, values: Mapping[str, torch.Tensor],
                 budget_s: float = BUDGET_S, constants: frozenset[str] = frozenset()) -> None:
        self.deadline = time.perf_counter() + budget_s
        self.budget_s = budget_s
        first = next(iter(values.values()))
        self.dtype, self.device = torch.float64, first.device
        self.expr = expr
        # data inputs (--const) keep their dtype (class indices stay integers) and get no
        # derivative
        self.constants = constants
        self.values = {k: v.detach().to(torch.float64) if v.is_floating_point() else v.detach()
                       for k, v in values.items()}
        self.inputs = {name: sp.Symbol(name, real=True) for name in expr.inputs}
        self.leaf_values: dict[sp.Symbol, torch.Tensor] = {
            self.inputs[n]: self.values[n] for n in expr.inputs}
        self.opaques: list[_Opaque] = []
        self._by_text: dict[str, _Opaque] = {}
        # nodes of the user's text (named by it); decompositions make others (named by _text)
        self._source = {id(n) for n in expr.walk()}
        self._metas: dict[str, torch.Tensor] | None = None  # shapes and dtypes, for _meta
        with process.cpu_budget(budget_s, self._over):  # (within one long sp.diff too)
            # (the output's own values are needed by no pass: its derivatives alone are
            # evaluated, a forward fewer — at a million elements each op is a millisecond)
            self.root = self._block(expr.root, valued=False)
        self.out_shape = self.root.shape

    @property
    def output(self) -> torch.Tensor:
        """The expression's value, as sympy's form of it evaluates (computed when asked)."""
        if self.root.value is None:
            env = {s: self.leaf_values[s] for s in self.root.expr.free_symbols
                   if s in self.leaf_values}
            value = SympyEvaluator(env, self.dtype, self.device).evaluate([self.root.expr])[0]
            self.root.value = value.expand(self.root.shape) if self.root.shape else value
        return self.root.value

    # ------------------------------------------------------------------ building
    def _block(self, node: ir.Node, valued: bool = True) -> _Block:
        leaves: list[sp.Symbol] = []
        sym_expr = self._sympy(node, leaves)
        shapes = [tuple(self.leaf_values[s].shape) for s in leaves]
        block = _Block(sym_expr, tuple(torch.broadcast_shapes(*shapes)) if shapes else ())
        present = [s for s in dict.fromkeys(leaves) if s in sym_expr.free_symbols
                   and s.name not in self.constants]
        block.deriv_exprs = {}
        for s in present:
            self._check_budget()
            block.deriv_exprs[s] = sp.diff(sym_expr, s)
        self._check_budget()
        block.deriv_exprs = {s: d for s, d in block.deriv_exprs.items() if d != 0}
        env = {s: self.leaf_values[s] for s in dict.fromkeys(leaves)}
        evaluator = SympyEvaluator(env, self.dtype, self.device)
        results = evaluator.evaluate([sym_expr, *block.deriv_exprs.values()] if valued
                                     else list(block.deriv_exprs.values()))
        if valued:
            value = results.pop(0)
            block.value = value.expand(block.shape) if block.shape else value
        if sym_expr in self.leaf_values:  # a bare leaf keeps its dtype (a bool mask stays one)
            leaf = self.leaf_values[sym_expr]
            block.value = leaf.expand(block.shape) if block.shape else leaf
        block.derivs = dict(zip(block.deriv_exprs, results, strict=True))
        return block

    def _over(self) -> None:
        raise BudgetExceeded(f"sympy took longer than its {self.budget_s:g} s budget")

    def _check_budget(self) -> None:
        if time.perf_counter() > self.deadline:
            raise BudgetExceeded(f"sympy took longer than its {self.budget_s:g} s budget")

    def _sympy(self, node: ir.Node, leaves: list[sp.Symbol]) -> sp.Expr:
        if isinstance(node, ir.Var):
            sym = self.inputs[node.name]
            leaves.append(sym)
            return sym
        if isinstance(node, ir.Num):
            return sp.Integer(int(node.value)) if node.is_int else sp.Float(node.value)
        if isinstance(node, ir.Const):
            return sp.pi if node.name == "pi" else sp.E
        assert isinstance(node, ir.Call)
        op = OPS[node.op]
        if op.decompose is not None:  # the same function written with other rows
            written = op.decompose(Build(node, OPS), node.args, node.kwargs,
                                   [self._meta(a) for a in node.args], node.names)
            return self._sympy(written, leaves)
        if op.sympy is not None:
            return op.sympy(*(self._sympy(a, leaves) for a in node.args), **node.kwargs)
        record = self._opaque(node, op)
        leaves.append(record.symbol)
        return record.symbol

    def _text(self, node: ir.Node) -> str:
        """A node a decomposition made, as short text: its arguments (source text where they
        come from the user's) and only the parameters that differ from the row's defaults."""
        if id(node) in self._source:
            return self.expr.text(node)
        if not isinstance(node, ir.Call):
            return ir.show(node)
        defaults = {p.name: p.default for p in OPS[node.op].params}
        parts = [self._text(a) for a in node.args]
        parts += [f"{k}={v!r}" for k, v in node.params if defaults.get(k) != v]
        return f"{node.op}({', '.join(parts)})"

    def _meta(self, node: ir.Node) -> torch.Tensor:
        """The shape and dtype `node` evaluates to (on meta tensors: nothing is computed)."""
        if self._metas is None:
            self._metas = {n: torch.empty(v.shape, dtype=v.dtype, device="meta")
                           for n, v in self.values.items()}
        if isinstance(node, ir.Var):
            return self._metas[node.name]
        return evaluate(ir.Expression(self.expr.source, node, self.expr.inputs), self._metas)

    def _opaque(self, node: ir.Call, op: Op) -> _Opaque:
        key = ir.show(node)  # structure, not source: decomposed nodes share their call's span
        if key in self._by_text:  # the same subterm twice: one value, one adjoint
            return self._by_text[key]
        args = [self._block(a) for a in node.args]
        text = self.expr.text(node) if id(node) in self._source else self._text(node)
        record = _Opaque(op, sp.Symbol(text, real=True), args, node.names, node.kwargs)
        record.value = op.apply([b.value for b in args], node.names, node.kwargs)
        self.leaf_values[record.symbol] = record.value
        self.opaques.append(record)  # children are appended before their parents
        self._by_text[key] = record
        return record

    def _adjoints(self, record: _Opaque, g: torch.Tensor) -> list:
        """The row's closed-form VJP, one value (or None) per call argument."""
        ups = record.op.vjp(g, record.value, record.slots([b.value for b in record.args]),  # type: ignore[misc]
                            record.params)
        return record.op.unslot(ups, record.names)

    def _formula(self, record: _Opaque, g: sp.Expr) -> list[sp.Expr]:
        """The adjoint of one opaque op as formulas (for table titles): the row's own, or
        the adjoint's name applied to the upstream (conv2d_vjp(v))."""
        if record.op.vjp_formula is None:
            if len(record.args) == 1:
                return [sp.Function(f"{record.op.name}_vjp")(g)]
            names = record.names or [p.name for p in record.op.tensor_params]
            if len(names) != len(record.args):  # cat([x, y]): by position
                names = [str(i) for i in range(len(record.args))]
            return [sp.Function(f"{record.op.name}_vjp_{n}")(g) for n in names]
        arg = record.args[0].value
        dim = record.params.get("dim")
        n = arg.numel() if not isinstance(dim, int) or arg.ndim == 0 else arg.shape[dim]
        return record.op.vjp_formula(g, record.symbol, [b.expr for b in record.args], n)

    # ------------------------------------------------------------------ passes
    def vjp(self, upstream: torch.Tensor) -> dict[str, torch.Tensor]:
        grads: dict[sp.Symbol, torch.Tensor] = {}
        self._backward(self.root, upstream.to(self.dtype), grads)
        for record in reversed(self.opaques):  # parents before children
            g = grads.pop(record.symbol, None)
            if g is None:
                continue
            for block, u in zip(record.args, self._adjoints(record, g), strict=True):
                if u is not None:
                    self._backward(block, u, grads)
        return {name: grads[sym] if sym in grads else torch.zeros_like(self.values[name])
                for name, sym in self.inputs.items()}

    def _backward(self, block: _Block, u: torch.Tensor,
                  grads: dict[sp.Symbol, torch.Tensor]) -> None:
        for sym, d in block.derivs.items():
            shape = self.leaf_values[sym].shape
            contrib = sum_to_shape((u * d).expand(torch.broadcast_shapes(u.shape, d.shape)),
                                   shape)
            grads[sym] = grads[sym] + contrib if sym in grads else contrib

    def jvp(self, tangents: Mapping[str, torch.Tensor]) -> torch.Tensor:
        tan: dict[sp.Symbol, torch.Tensor] = {
            sym: tangents[name].to(self.dtype) for name, sym in self.inputs.items()
            if name in tangents}
        for record in self.opaques:  # children first
            arg_t = record.slots([self._forward(b, tan) for b in record.args])
            tan[record.symbol] = record.op.jvp(arg_t, record.value,  # type: ignore[misc]
                                               record.slots([b.value for b in record.args]),
                                               record.params)
        return self._forward(self.root, tan)

    def _forward(self, block: _Block, tan: Mapping[sp.Symbol, torch.Tensor]) -> torch.Tensor:
        total = torch.zeros(block.shape, dtype=self.dtype, device=self.device)
        for sym, d in block.derivs.items():
            if sym in tan:
                total = total + d * tan[sym]
        return total

    # ------------------------------------------------------------------ formulas
    def formulas(self, upstream_name: str) -> dict[str, str]:
        """The VJP of each input as a formula in the inputs and the upstream symbol."""
        v = sp.Symbol(upstream_name, real=True)
        acc: dict[sp.Symbol, sp.Expr] = {}

        def back(block: _Block, u: sp.Expr) -> None:
            for sym, d in block.deriv_exprs.items():
                acc[sym] = acc.get(sym, sp.S.Zero) + u * d

        back(self.root, v)
        for record in reversed(self.opaques):
            g = acc.pop(record.symbol, None)
            if g is None:
                continue
            for block, u in zip(record.args, self._formula(record, g), strict=True):
                back(block, u)
        out = {}
        for name, sym in self.inputs.items():
            if name in self.constants:
                continue
            formula = acc.get(sym, sp.S.Zero)
            ops = sp.count_ops(formula)
            if ops > MAX_FORMULA_OPS:
                out[name] = f"(a formula of {ops} operations; too large to show)"
                continue
            text = sp.sstr(formula)
            out[name] = text if len(text) <= MAX_FORMULA else text[:MAX_FORMULA - 1] + "…"
        return out
