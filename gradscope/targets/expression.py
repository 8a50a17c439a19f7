"""TARGET → Target: what the engines need to know about the thing being checked.

An expression target evaluates its IR in torch (for autograd), exposes the IR (for the symbolic
engine), and reports branch ids of its kinky ops plus which inputs enter elementwise (for the
finite-difference engine). Python targets (`file.py:NAME`, `package.module:NAME`, or objects)
are built by `usercode`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import torch

from gradscope.errors import UsageError
from gradscope.expr import ir
from gradscope.expr.incremental import ColumnEvaluator
from gradscope.expr.ops import OPS
from gradscope.expr.parse import constant_value, parse
from gradscope.expr.to_torch import evaluate
from gradscope.tensors import all_finite

# Finite differences keep subexpressions evaluated at the base point for reuse up to this
# many elements in all (512 MB in float64); past it every point is evaluated in full.
MAX_REUSED_ELEMENTS = 1 << 26


@dataclass(frozen=True)
class Branch:
    """A kinky op application in the expression: its op name and source text."""

    op: str
    where: str
    inputs: tuple[str, ...]


@dataclass
class ExpressionTarget:
    text: str
    expression: ir.Expression
    kind: str = "expression"
    branch_sites: list[Branch] = field(default_factory=list, init=False)
    _kinky: dict[tuple[int, int], bool] = field(default_factory=dict, repr=False)
    _sites: dict[int, int] = field(default_factory=dict, repr=False, init=False)

    @property
    def names(self) -> tuple[str, ...]:
        return self.expression.inputs

    @property
    def target_kind(self) -> str:
        return self.kind

    @property
    def notes(self) -> list[str]:
        return []

    def roles(self) -> dict[str, str]:
        return dict.fromkeys(self.names, "input")

    def forward(self, values: Mapping[str, torch.Tensor]) -> torch.Tensor:
        return evaluate(self.expression, values)

    def __post_init__(self) -> None:
        # The kinky op applications in evaluation (post-)order: the order of traced()'s branch
        # ids. A constant argument that decides the kink (x**2, x/3) leaves an op out.
        order: list[ir.Call] = []

        def post(node: ir.Node) -> None:
            if isinstance(node, ir.Call):
                for arg in _evaluated_args(node):
                    post(arg)
                if OPS[node.op].branch is not None and self._can_kink(node):
                    order.append(node)

        post(self.expression.root)
        self._sites = {id(node): k for k, node in enumerate(order)}
        self.branch_sites = [Branch(node.op, self.expression.text(node),
                                    tuple(n for n in self.names if ir.depends_on(node, n)))
                             for node in order]

    def traced(self, values: Mapping[str, torch.Tensor], *,
               reuse: Mapping[int, torch.Tensor] | None = None,
               base_branches: list[torch.Tensor] | None = None
               ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Forward plus the branch id of every kinky op application (`branch_sites` order).
        `reuse` maps nodes to values computed before (their subtrees are not evaluated, and
        their branch ids are taken from `base_branches`)."""
        sites = self._sites
        branches: list = list(base_branches) if base_branches is not None else [None] * len(sites)

        def visit(node: ir.Call, args: list, out: torch.Tensor) -> None:
            k = sites.get(id(node))
            if k is not None:
                branches[k] = OPS[node.op].branch(*args)

        out = evaluate(self.expression, values, visit=visit if sites else None, reuse=reuse)
        return out, branches

    def traced_around(self, base: Mapping[str, torch.Tensor]):
        """traced(base); a factory of traced functions for points that differ from `base`
        in one input only: each reuses the subexpressions without that input, evaluated here
        once (finite differences move one input at a time; `3*a + log(c)` moving `a` need not
        recompute `log(c)`); and a factory of column evaluators for the dense inputs (None
        where memory forbids keeping every node's base value)."""
        deps = self._dependencies
        frontier: dict[str, set[int]] = {}
        for name in self.names:
            keep: set[int] = set()
            for node in self.expression.walk():
                if isinstance(node, ir.Call) and name in deps[id(node)]:
                    keep.update(id(a) for a in _evaluated_args(node)
                                if isinstance(a, ir.Call) and name not in deps[id(a)])
            frontier[name] = keep
        wanted = set().union(*frontier.values()) if frontier else set()
        kept: dict[int, torch.Tensor] = {}
        # Dense inputs get column-wise evaluation, which needs the base value of every node on
        # their paths and of the constants those nodes take.
        dense = set(self.names) - self.elementwise_inputs
        needed: set[int] = set()
        for node in self.expression.walk():
            if isinstance(node, ir.Call) and deps[id(node)] & dense:
                needed.add(id(node))
                needed.update(id(a) for a in node.args)
        every: dict[int, torch.Tensor] | None = {} if dense else None
        sites = self._sites
        branches: list = [None] * len(sites)

        def visit(node: ir.Call, args: list, out: torch.Tensor) -> None:
            if id(node) in wanted:
                kept[id(node)] = out
            if every is not None and id(node) in needed:
                every[id(node)] = out
            k = sites.get(id(node))
            if k is not None:
                branches[k] = OPS[node.op].branch(*args)

        out = evaluate(self.expression, base, visit=visit)
        if sum(t.numel() for t in kept.values()) > MAX_REUSED_ELEMENTS:
            kept, frontier = {}, {}  # memory first: every point is evaluated in full
        if every is not None and sum(t.numel() for t in every.values()) > MAX_REUSED_ELEMENTS:
            every = None

        def moving(name: str):
            reuse = {i: kept[i] for i in frontier.get(name, ()) if i in kept}
            if not reuse:
                return self.traced
            return lambda values: self.traced(values, reuse=reuse, base_branches=branches)

        def columns(name: str) -> ColumnEvaluator | None:
            if every is None or name in self.elementwise_inputs:
                return None
            path = {i for i, names in deps.items() if name in names}
            return ColumnEvaluator(self.expression, name, base, every, sites, branches, path)

        return out, branches, moving, columns

    @cached_property
    def _dependencies(self) -> dict[int, frozenset[str]]:
        """The inputs each node depends on, by node id (one pass, children first)."""
        deps: dict[int, frozenset[str]] = {}

        def visit(node: ir.Node) -> frozenset[str]:
            if isinstance(node, ir.Var):
                found = frozenset((node.name,))
            elif isinstance(node, ir.Call):
                found = frozenset().union(*(visit(a) for a in node.args))
            else:
                found = frozenset()
            deps[id(node)] = found
            return found

        visit(self.expression.root)
        return deps

    def sourced(self, values: Mapping[str, torch.Tensor]):
        """Forward that also maps each grad_fn to its op and source span, and notes the first
        ops whose output is NaN/inf from finite inputs (for the gradient-flow analysis)."""
        where: dict[int, tuple[str, str]] = {}
        forward_nan: list[tuple[str, str, int]] = []

        def visit(node: ir.Call, args: list, out: torch.Tensor) -> None:
            if out.grad_fn is not None and id(out.grad_fn) not in where:
                where[id(out.grad_fn)] = (node.op, self.expression.text(node))
            tensors = [a for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()]
            if out.is_floating_point() and not all_finite(out) and all(
                    all_finite(a) for a in tensors):
                bad = int((~torch.isfinite(out)).sum())
                inputs = tuple(n for n in self.names if ir.depends_on(node, n))
                forward_nan.append((node.op, self.expression.text(node), inputs, bad))

        out = evaluate(self.expression, values, visit=visit)
        return out, where, forward_nan

    def _can_kink(self, node: ir.Call) -> bool:
        """False where the op's kink provably cannot be crossed: constant arguments decide it
        (the row's `kink_args`: x**2, x/3) or nothing in it depends on an input."""
        key = node.span
        if key not in self._kinky:
            positions = OPS[node.op].kinky_args(tuple(constant_value(a) for a in node.args))
            self._kinky[key] = any(ir.depends_on(node.args[k], n) for k in positions
                                   for n in self.names)
        return self._kinky[key]

    @cached_property
    def elementwise_inputs(self) -> set[str]:
        """Inputs on which the output depends elementwise (through broadcasting only)."""
        return {n for n in self.names if _elementwise_in(self.expression.root, n)}

    @cached_property
    def is_elementwise(self) -> bool:
        return all(OPS[n.op].elementwise for n in self.expression.walk()
                   if isinstance(n, ir.Call))

    def domain(self, name: str) -> tuple[float, float] | None:
        """Where default random values for `name` should lie: the domain of the first op that
        takes `name` directly as an argument (log(c) → c > 0)."""
        for node in self.expression.walk():
            if isinstance(node, ir.Call) and OPS[node.op].domain is not None and any(
                    isinstance(a, ir.Var) and a.name == name for a in node.args):
                return OPS[node.op].domain
        return None


def _evaluated_args(node: ir.Call) -> tuple[ir.Node, ...]:
    """The arguments evaluation visits (a reduction's dim is a plain number, not evaluated)."""
    return node.args[:1] if OPS[node.op].takes_dim else node.args


def _elementwise_in(node: ir.Node, name: str) -> bool:
    if not ir.depends_on(node, name):
        return True
    if isinstance(node, ir.Var):
        return True
    assert isinstance(node, ir.Call)
    if not OPS[node.op].elementwise:
        return False
    return all(_elementwise_in(a, name) for a in node.args)


def resolve(target: object, *, args: Mapping[str, Any] | None = None,
            init: Mapping[str, Any] | None = None, base: Path | None = None,
            positional: tuple[Any, ...] = ()):
    """Turn a TARGET into a Target: expression text, `file.py:NAME`, `package.module:NAME`,
    or (from the API) a Function subclass, nn.Module, or function."""
    from gradscope.targets import python as usercode

    if isinstance(target, str):
        text = target.strip()
        if usercode.is_python_target(text):
            obj, _ = usercode.load(text, base)
            return usercode.build(obj, text, args or {}, init or {}, positional)
        if positional:
            raise UsageError("expression inputs are passed by name, e.g. check(\"x**2\", x=t)")
        if args:
            raise UsageError("--arg gives non-tensor arguments to Python targets; an "
                             "expression takes tensors only (use --at)")
        if init:
            raise UsageError("--init gives constructor arguments to an nn.Module class only")
        return ExpressionTarget(text, parse(text))
    if callable(target) or isinstance(target, torch.nn.Module):
        name = getattr(target, "__qualname__", None) or type(target).__name__
        return usercode.build(target, name, args or {}, init or {}, positional)
    raise UsageError(f"a target is an expression string, a torch.autograd.Function, an "
                     f"nn.Module or a function; got {type(target).__name__}")


@dataclass
class SecondOrderTarget:
    """`--order 2`: the target whose output is the first-order VJP (with `create_graph=True`),
    so the engines check double backward the way gradgradcheck does."""

    base: Any
    upstream: Any = None  # the inner upstream value (None: ones)
    branch_sites: list = field(default_factory=list)

    @property
    def text(self) -> str:
        return f"∂/∂inputs of VJP[{self.base.text}]"

    @property
    def kind(self) -> str:
        return self.base.kind

    @property
    def target_kind(self) -> str:
        return f"{self.base.target_kind} (order 2)"

    @property
    def names(self) -> tuple[str, ...]:
        return self.base.names

    @property
    def notes(self) -> list[str]:
        return [*self.base.notes, "order 2: the output is the first-order VJP, concatenated over "
                "the inputs; its backward is double backward"]

    def roles(self) -> dict[str, str]:
        return self.base.roles()

    @property
    def elementwise_inputs(self) -> set[str]:
        return set()

    @property
    def is_elementwise(self) -> bool:
        return False

    def domain(self, name: str) -> tuple[float, float] | None:
        return self.base.domain(name)

    def forward(self, values: Mapping[str, torch.Tensor]) -> torch.Tensor:
        leaves = {k: v if v.requires_grad else v.detach().requires_grad_() for k, v in
                  values.items()}
        with torch.enable_grad():
            out = self.base.forward(leaves)
            v = torch.ones_like(out) if self.upstream is None else self.upstream.to(
                device=out.device, dtype=out.dtype)
            if v.shape != out.shape:
                raise UsageError(f"--grad has shape {tuple(v.shape)} but the output has shape "
                                 f"{tuple(out.shape)}")
            grads = torch.autograd.grad(out, list(leaves.values()), v, create_graph=True,
                                        allow_unused=True)
        flat = torch.cat([g.reshape(-1) if g is not None else torch.zeros_like(x).reshape(-1)
                          for g, x in zip(grads, leaves.values(), strict=True)])
        if not flat.requires_grad and any(x.requires_grad for x in values.values()):
            # The first-order gradient does not depend on the inputs at all (x -> 3x, or a
            # straight-through backward): its derivative is zero, and autograd should say so.
            flat = flat + sum((x * 0).sum() for x in leaves.values())
        return flat

    def traced(self, values: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, list]:
        return self.forward(values).detach(), []
