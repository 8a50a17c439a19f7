"""TARGET → Target: what the engines need to know about the thing being checked.

`resolve` turns expression text, `file.py:NAME`, `package.module:NAME` or a Python object into a
Target (`base.Target`): an `ExpressionTarget` (expression.py), a `PythonTarget` (python.py), or,
for `--order 2`, a `SecondOrderTarget` (second_order.py) around either.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from gradscope.errors import UsageError
from gradscope.expr.parse import parse
from gradscope.targets import loading
from gradscope.targets import python as usercode
from gradscope.targets.expression import ExpressionTarget
from gradscope.targets.second_order import SecondOrderTarget


def resolve(target: object, *, args: Mapping[str, Any] | None = None,
            init: Mapping[str, Any] | None = None, base: Path | None = None,
            positional: tuple[Any, ...] = ()):
    """Turn a TARGET into a Target: expression text, `file.py:NAME`, `package.module:NAME`,
    or (from the API) a Function subclass, nn.Module, or function."""
    if isinstance(target, str):
        text = target.strip()
        if usercode.is_python_target(text):
            obj, _ = loading.load(text, base)
            return usercode.build(obj, text, args or {}, init or {}, positional)
        if text.endswith(".py"):
            raise UsageError(missing_name(text, base))
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


def missing_name(text: str, base: Path | None) -> str:
    """`check ops.py`: say that a NAME is missing, with the file's top-level classes and
    functions (read with `ast`, never run)."""
    path = (base or Path.cwd()) / text
    found: list[str] = []
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found = [n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)
                 and not n.name.startswith("_")]
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        pass
    names = f"; it defines {', '.join(found[:12])}" if found else ""
    return (f"`{text}` names a file but not what to check in it: write {text}:NAME (a "
            f"torch.autograd.Function, an nn.Module or a function){names}")


__all__ = ["ExpressionTarget", "SecondOrderTarget", "resolve"]
