"""TARGET → Target: what the engines need to know about the thing being checked.

`resolve` turns expression text, `file.py:NAME`, `package.module:NAME` or a Python object into a
`base.Target`: an `ExpressionTarget` (expression.py), or one of the kinds of user code in
`KINDS` — a Function (function.py), a Module (module.py), a plain function (plain.py).
A new kind is one module with a `build(obj, text, args, init)` that returns its Target (None: not
its kind), and one line in `KINDS`. `--order 2` wraps any of them (second_order.py), and so do
the run modes in `MODES` (mode.py: compiled, autocast, ordinary calls only) — or a mode builds
its own target (the ranks of --nproc: distributed/). A new mode is one module with a `MODE` and
one line in `MODES`.
"""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from gradscope.errors import UsageError
from gradscope.expr.parse import parse
from gradscope.targets import (
    autocast,
    compiled,
    custom_op,
    distributed,
    function,
    loading,
    module,
    ordinary,
    plain,
)
from gradscope.targets.base import Target
from gradscope.targets.closures import top_level
from gradscope.targets.expression import ExpressionTarget
from gradscope.targets.mode import Mode
from gradscope.targets.second_order import SecondOrderTarget

Builder = Callable[[Any, str, Mapping[str, Any], Mapping[str, Any]], Target | None]
# the kinds of user code, tried in order (a Function class before any callable)
KINDS: list[Builder] = [function.build, module.build, custom_op.build, plain.build]
# the run modes, in the order they wrap the target (the innermost first; a mode that builds
# its own target and binding — the ranks — comes first and is wrapped by the others)
MODES: list[Mode] = [distributed.MODE, ordinary.MODE, compiled.MODE, autocast.MODE]


def resolve(target: object, *, args: Mapping[str, Any] | None = None,
            init: Mapping[str, Any] | None = None, base: Path | None = None,
            positional: tuple[Any, ...] = (), imports: tuple[str, ...] = ()) -> Target:
    """Turn a TARGET into a Target: expression text, `file.py:NAME`, `package.module:NAME`,
    `NS::OP` (a registered custom op; `imports` are imported first, for what they register),
    or (from the API) a Function subclass, nn.Module, function or op."""
    args, init = dict(args or {}), dict(init or {})
    for name in imports:
        loading.imported(name, base)
    if isinstance(target, str):
        text = target.strip()
        op = custom_op.spelled(text)
        if op is not None:
            return code_target(op, text, args, init, positional)
        if loading.is_python_target(text):
            obj, _ = loading.load(text, base)
            return code_target(obj, text, args, init, positional)
        if text.endswith(".py"):
            raise UsageError(missing_name(text, base))
        if positional:
            raise UsageError("expression inputs are passed by name, e.g. check(\"x**2\", x=t)")
        if args:
            raise UsageError("--arg gives non-tensor arguments to Python targets; an "
                             "expression takes tensors only (use --at)")
        if init:
            raise UsageError("--init gives constructor arguments to an nn.Module class only")
        try:
            expression = parse(text)
        except UsageError:
            better = code_spelling(text, base)
            if better is None:
                raise
            raise UsageError(f"`{text}` is neither an expression nor a Python target as "
                             f"gradscope spells one: did you mean {better}? (FILE.py:NAME or "
                             "package.module:NAME, with one colon)") from None
        return ExpressionTarget(text, expression)
    name = getattr(target, "__qualname__", None) or type(target).__name__
    return code_target(target, name, args, init, positional, api=True)


def code_target(obj: Any, text: str, args: Mapping[str, Any], init: Mapping[str, Any],
                positional: tuple[Any, ...] = (), api: bool = False) -> Target:
    """The first kind in KINDS that takes `obj`, with its arguments bound: `positional` (API)
    are forward's arguments in order (tensors become inputs, anything else an argument)."""
    owner = getattr(obj, "__self__", None)  # `F.apply` is `F`: how gradcheck tests call it
    if getattr(obj, "__name__", "") == "apply" and isinstance(owner, type) \
            and issubclass(owner, torch.autograd.Function):
        obj = owner
    args = top_level(obj, args, text)
    made = next((m for m in (build(obj, text, args, init) for build in KINDS) if m), None)
    if made is None:
        if api:
            raise UsageError(f"a target is an expression string, a torch.autograd.Function, "
                             f"an nn.Module or a function; got {type(obj).__name__}")
        raise UsageError(f"{text} is a {type(obj).__name__}; expected a torch.autograd.Function "
                         "subclass, an nn.Module (class or instance) or a function")
    if init and not made.takes_init:
        raise UsageError("--init gives constructor arguments to an nn.Module class only")
    made.bind_arguments(args, positional)
    return made


def code_spelling(text: str, base: Path | None) -> str | None:
    """A Python target in another tool's spelling, as gradscope reads it: pytest's
    `file.py::Name`, a dotted `package.module.Name` whose package is there (a folder or
    file beside `base`, or an importable top-level name, found without importing it)."""
    head, sep, tail = text.partition("::")
    if sep and head.endswith(".py") and tail.isidentifier():
        return f"{head}:{tail}"
    parts = text.split(".")
    if len(parts) < 2 or not all(p.isidentifier() for p in parts):
        return None
    here = base or Path.cwd()
    top = parts[0]
    if (here / top).is_dir() or (here / f"{top}.py").is_file() or _importable(top):
        return f"{'.'.join(parts[:-1])}:{parts[-1]}"
    return None


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


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


__all__ = ["KINDS", "MODES", "ExpressionTarget", "Mode", "SecondOrderTarget", "Target",
           "resolve"]
