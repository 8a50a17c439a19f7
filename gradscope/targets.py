"""TARGET → Target: what the engines need to know about the thing being checked.

An expression target evaluates its IR in torch (for autograd), exposes the IR (for the symbolic
engine), and reports branch ids of its kinky ops plus which inputs enter elementwise (for the
finite-difference engine). Python targets (`file.py:NAME`, `package.module:NAME`) are recognised
by their `:` and refused with a clear message until they are supported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

import torch

from gradscope.errors import UsageError
from gradscope.expr import ir
from gradscope.expr.ops import OPS
from gradscope.expr.parse import constant_value, parse
from gradscope.expr.to_torch import evaluate


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
    branch_sites: list[Branch] = field(default_factory=list)
    _kinky: dict[tuple[int, int], bool] = field(default_factory=dict, repr=False)

    @property
    def names(self) -> tuple[str, ...]:
        return self.expression.inputs

    def forward(self, values: Mapping[str, torch.Tensor]) -> torch.Tensor:
        return evaluate(self.expression, values)

    def traced(self, values: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, list]:
        """Forward plus the branch id of every kinky op application, in a fixed order."""
        branches: list[torch.Tensor] = []
        sites: list[Branch] = []

        def visit(node: ir.Call, args: list, out: torch.Tensor) -> None:
            op = OPS[node.op]
            if op.branch is not None and self._can_kink(node):
                branches.append(op.branch(*args))
                sites.append(Branch(op.name, self.expression.text(node),
                                    tuple(n for n in self.names if ir.depends_on(node, n))))

        out = evaluate(self.expression, values, visit=visit)
        if not self.branch_sites:
            self.branch_sites = sites
        return out, branches

    def _can_kink(self, node: ir.Call) -> bool:
        """False where the op's kink provably cannot be crossed: a constant argument decides
        it (x**2, x/3) or nothing in it depends on an input."""
        key = node.span
        if key not in self._kinky:
            relevant: tuple[ir.Node, ...] = node.args
            if node.op == "pow" and _nonnegative_int(node.args[1]):
                relevant = ()
            elif node.op == "div":
                relevant = node.args[1:]
            self._kinky[key] = any(ir.depends_on(a, n) for a in relevant for n in self.names)
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


def _nonnegative_int(node: ir.Node) -> bool:
    """True when `node` is a constant whole number >= 0 (x**2 is smooth everywhere)."""
    value = constant_value(node)
    return value is not None and value == value and value >= 0 and float(value).is_integer()


def _elementwise_in(node: ir.Node, name: str) -> bool:
    if not ir.depends_on(node, name):
        return True
    if isinstance(node, ir.Var):
        return True
    assert isinstance(node, ir.Call)
    if not OPS[node.op].elementwise:
        return False
    return all(_elementwise_in(a, name) for a in node.args)


def resolve(target: object) -> ExpressionTarget:
    """Turn a TARGET (expression text) into a Target."""
    if not isinstance(target, str):
        raise UsageError(f"a target must be an expression string, got {type(target).__name__}")
    text = target.strip()
    if _looks_like_python_target(text):
        raise UsageError(f"`{text}` names Python code (file.py:NAME or package.module:NAME); "
                         "this build checks expression targets only, e.g. \"3*a + log(c)\"")
    return ExpressionTarget(text, parse(text))


def _looks_like_python_target(text: str) -> bool:
    head, sep, tail = text.rpartition(":")
    return bool(sep) and bool(head) and tail.isidentifier() and (
        head.endswith(".py") or all(part.isidentifier() for part in head.split(".")))
