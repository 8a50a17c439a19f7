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


def depends_on(node: Node, name: str) -> bool:
    return any(isinstance(n, Var) and n.name == name for n in walk(node))
