"""The user's own numbers, as a factor in a wrong gradient may be read: the values given with
--arg, the defaults of the target's parameters, and the numeric constants written in its
source (read with `ast`, never run). 0 and ±1 say nothing about a factor and are left out."""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

MAX_NUMBERS = 12  # constants taken from one source (the first ones written)


def _usable(value: Any) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and value not in (0, 1, -1) and value == value and abs(value) != float("inf"))


def given(args: Mapping[str, Any], params: Iterable[Any]) -> dict[str, float]:
    """--arg values and parameter defaults: {'scale (--arg scale=2.0)': 2.0, …}."""
    out: dict[str, float] = {}
    for name, value in args.items():
        if _usable(value):
            out[f"{name} (--arg {name}={value!r})"] = float(value)
    for p in params:
        default = getattr(p, "default", inspect.Parameter.empty)
        if p.name not in args and _usable(default):
            out[f"{p.name} (its default {default!r})"] = float(default)
    return out


def written(obj: Any) -> dict[str, float]:
    """Numeric constants in `obj`'s source (a class: all its methods, and those of the user's
    classes it derives from): {'the constant 0.1 in ops.py:19': 0.1, …}. Left out: defaults
    (`given` names them), exponents (`x ** 2`: a square's 2 is read as such), indices and
    dimensions; {} where the source cannot be read."""
    out: dict[str, float] = {}
    for source in _sources(obj):
        for value, label in _constants(source):
            if value not in out.values() and len(out) < MAX_NUMBERS:
                out[label] = value
    return out


def _sources(obj: Any) -> list[Any]:
    """`obj`, and for a class the classes of the user's it derives from (not torch's)."""
    if not inspect.isclass(obj):
        return [obj]
    return [c for c in obj.__mro__ if c is not object
            and not (c.__module__ or "").startswith(("torch", "builtins"))]


def _constants(obj: Any) -> list[tuple[float, str]]:
    try:
        lines, first = inspect.getsourcelines(obj)
        path = Path(inspect.getsourcefile(obj) or "?").name
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return []
    skip = {id(n) for n in _not_factors(tree)}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and id(node) not in skip and _usable(node.value):
            line = first + node.lineno - 1
            out.append((float(node.value), f"the constant {node.value!r} in {path}:{line}"))
    return out


def _not_factors(tree: ast.AST) -> list[ast.AST]:
    """Constants that are no factor: defaults, exponents, subscripts, dims and axes."""
    out: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arguments):
            out += [*node.defaults, *(d for d in node.kw_defaults if d is not None)]
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            out.append(node.right)
        elif isinstance(node, ast.Subscript):
            out += list(ast.walk(node.slice))
        elif isinstance(node, ast.keyword) and node.arg in ("dim", "axis", "dims", "p"):
            out += list(ast.walk(node.value))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in DIMENSIONAL:
            out += [n for a in node.args for n in ast.walk(a)]
    return out


# methods whose positional numbers are dimensions or shapes, not factors
DIMENSIONAL = {"sum", "mean", "softmax", "log_softmax", "view", "reshape", "permute",
               "transpose", "unsqueeze", "squeeze", "flatten", "size", "expand", "repeat",
               "cumsum", "cumprod", "argmax", "max", "min", "narrow", "select", "chunk",
               "split", "amax", "amin", "norm", "topk", "cat", "stack", "t", "movedim"}
