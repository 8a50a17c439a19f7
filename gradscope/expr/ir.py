"""The expression IR: a few frozen dataclasses that both builders (torch and sympy) walk.

Every node remembers its span in the source text so diagnostics can point at `round(x)` inside
`sum(round(x) * w)`. Binary and unary operators are stored by op-table name (`add`, `neg`, ...),
so the op table is the single place that says what each of them means.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Node:
    span: tuple[int, int]


@dataclass(frozen=True)
class Num(Node):
    value: float
    is_int: bool = False


@dataclass(frozen=True)
class Const(Node):
    """A named constant (`pi`, `e`)."""

    name: str
    value: float


@dataclass(frozen=True)
class Var(Node):
    name: str


@dataclass(frozen=True)
class Call(Node):
    """An application of an op-table row: functions, operators and comparisons alike."""

    op: str
    args: tuple[Node, ...]
    # Static keyword parameters torch takes as Python values (dim, keepdim, reduction, ...),
    # as (name, value) pairs of ints, floats, strings, bools, None and tuples of those.
    params: tuple[tuple[str, object], ...] = ()
    # The row's parameter name of each argument, where the row has a signature with optional
    # tensors (layer_norm's weight without a bias); empty: positional in order.
    names: tuple[str, ...] = ()

    @property
    def kwargs(self) -> dict[str, object]:
        return dict(self.params)


@dataclass(frozen=True)
class Expression:
    """A parsed expression: the source, the root node and the input names in order of appearance."""

    source: str
    root: Node
    inputs: tuple[str, ...]

    def text(self, node: Node) -> str:
        start, end = node.span
        return self.source[start:end]

    def walk(self) -> Iterator[Node]:
        return walk(self.root)


def walk(node: Node) -> Iterator[Node]:
    """Pre-order traversal without recursion (depth is bounded, but stay cheap anyway)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if isinstance(current, Call):
            stack.extend(reversed(current.args))


def show(node: Node) -> str:
    """The node as expression text (for nodes made by gradscope, which have no source)."""
    if isinstance(node, Num):
        return str(int(node.value)) if node.is_int else repr(node.value)
    if isinstance(node, Const | Var):
        return node.name
    assert isinstance(node, Call)
    parts = [show(a) for a in node.args]
    parts += [f"{k}={v!r}" for k, v in node.params if not k.startswith("_")]
    return f"{node.op}({', '.join(parts)})"


def depends_on(node: Node, name: str) -> bool:
    return any(isinstance(n, Var) and n.name == name for n in walk(node))
