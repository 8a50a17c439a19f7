"""What a run config's check can be told before anything runs, without running user code: the
target parses (expression) or its file exists relative to the config; input names fit the
target (an expression's free names, or a plain function's / autograd.Function's parameters
read with `ast` from its file); VALUEs read; the device is one gradscope knows."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from gradscope.errors import UsageError
from gradscope.options import ANY_INPUT, Request

_DEVICE = re.compile(r"(cpu|cuda(:\d+)?)\Z")


def precheck(request: Request, base: Path) -> None:
    from gradscope.option_text import parse_literal

    options = request.options
    for key in ("arg", "init"):
        for name, value in getattr(options, key).items():
            if not isinstance(value, str):  # a string argument is passed as the string itself
                parse_literal(repr(value), f"{key}.{name}")
    if not _DEVICE.match(options.device):
        raise UsageError(f"`device` {options.device!r}: allowed are cpu, cuda, cuda:N")
    names = _input_names(request.target.strip(), base, set(options.arg))
    for key, given in (("at", options.at), ("const", options.const),
                       ("shape", options.shape), ("tangent", options.tangent or {}),
                       ("surrogate", dict.fromkeys(options.surrogates.names))):
        unknown = sorted(set(given) - {ANY_INPUT} - set(names)) if names is not None else []
        if unknown:
            raise UsageError(f"`{key}` names `{unknown[0]}`, which is not an input of the "
                             f"target; inputs are: {', '.join(names)}")
    for key, given in (("at", options.at), ("const", options.const)):
        for name, value in given.items():
            _value(value, f"{key}.{name}")
    for name, value in (options.tangent or {}).items():
        _value(value, "tangent" if name == ANY_INPUT else f"tangent.{name}")
    if options.grad is not None:
        _value(options.grad, "grad")


def _value(value: Any, where: str) -> None:
    """A VALUE as the run will read it: text, a number or an array (NaN refused)."""
    from gradscope.inputs.text import parse_value

    if isinstance(value, bool) or not isinstance(value, str | int | float | list):
        raise UsageError(f"`{where}` must be VALUE text, a number or an array, got "
                         f"{type(value).__name__}")
    parse_value(value if isinstance(value, str) else repr(value), where)


def _input_names(target: str, base: Path, args: set[str]) -> list[str] | None:
    """The target's input names where they are known without running it, else None."""
    from gradscope.expr.parse import parse
    from gradscope.targets.loading import is_python_target

    if not is_python_target(target):
        return list(parse(target).inputs)
    head, _, name = target.rpartition(":")
    if not head.endswith(".py"):
        return None  # package.module: found only by importing it
    path = Path(head) if Path(head).is_absolute() else base / head
    if not path.is_file():  # resolved against the config's folder, as the run will
        raise UsageError(f"`target`: no such file {head} (relative to {base})")
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return None  # the run reports it as the user's error
    return _parameters(tree, name, args)


def _parameters(tree: ast.Module, name: str, args: set[str]) -> list[str] | None:
    """Tensor parameters of a top-level function, or of an autograd.Function's forward
    (after ctx); None for anything else (a Module's parameters are known only once built)."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return [a.arg for a in node.args.args if a.arg not in args]
        if isinstance(node, ast.ClassDef) and node.name == name:
            forward = next((f for f in node.body if isinstance(f, ast.FunctionDef)
                            and f.name == "forward"), None)
            static = forward is not None and any(
                isinstance(d, ast.Name) and d.id == "staticmethod" for d in forward.decorator_list)
            if static and forward.args.args:
                return [a.arg for a in forward.args.args[1:] if a.arg not in args]
            return None
    return None
