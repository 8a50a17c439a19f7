"""Loading a Python target: `file.py:NAME` (its folder first on sys.path, so it can import its
neighbours) or `package.module:NAME`, with the user's import errors kept theirs."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from pathlib import Path
from typing import Any

import torch

from gradscope.errors import UsageError
from gradscope.targets.registered import registering
from gradscope.usercode import relative_path, user_code


def is_python_target(text: str) -> bool:
    """`file.py:NAME` or `package.module:NAME`; NAME may be an attribute path
    (`MyFunction.apply`, `model.encoder`)."""
    head, sep, tail = text.strip().rpartition(":")
    return bool(sep) and bool(head) and all(p.isidentifier() for p in tail.split(".")) and (
        head.endswith(".py") or all(part.isidentifier() for part in head.split(".")))


def load(text: str, base: Path | None = None) -> tuple[Any, str]:
    """Import the object named by `file.py:NAME` or `package.module:NAME`."""
    head, _, name = text.strip().rpartition(":")
    if head.endswith(".py"):
        path = Path(head)
        if not path.is_absolute():
            path = (base or Path.cwd()) / path
        if not path.is_file():
            raise UsageError(f"no such file: {head} (a target is file.py:NAME or "
                             "package.module:NAME)")
        module = _load_file(path)
        where = head
    else:
        module = _load_module(head, base)
        where = head
    first, *rest = name.split(".")
    if not hasattr(module, first):
        candidates = candidates_in(module)
        listed = ", ".join(candidates) if candidates else "none"
        raise UsageError(f"{where} has no `{first}`; checkable names there: {listed}")
    obj = getattr(module, first)
    for k, part in enumerate(rest):
        try:
            obj = getattr(obj, part)
        except Exception:  # (the user's __getattr__ may raise anything: the name is missing)
            raise UsageError(f"{where}: `{'.'.join([first, *rest[:k]])}` has no `{part}`") \
                from None
    return obj, where


def imported(text: str, base: Path | None = None) -> Any:
    """--import: FILE.py or package.module imported for what it registers (custom ops)."""
    text = text.strip()
    if text.endswith(".py"):
        path = Path(text) if Path(text).is_absolute() else (base or Path.cwd()) / text
        if not path.is_file():
            raise UsageError(f"--import {text}: no such file")
        return _load_file(path)
    if not all(part.isidentifier() for part in text.split(".")):
        raise UsageError(f"--import {text}: give FILE.py or package.module")
    return _load_module(text, base)


def _load_file(path: Path) -> Any:
    # A file this process already imported is that module, as `package.module:NAME` is: running
    # it again would make a second set of its objects, and a second `torch.library.custom_op`
    # of a name destroys the first one's library — the user's op would crash their process.
    known = _imported_as(path)
    if known is not None:
        return known
    mod_name = f"_gradscope_user_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"cannot load {path} as a Python file")
    module = importlib.util.module_from_spec(spec)
    folder = str(path.resolve().parent)
    sys.path.insert(0, folder)  # so the file can import its neighbours
    try:
        sys.modules[mod_name] = module
        with user_code(f"import of {relative_path(str(path))}"), registering():
            spec.loader.exec_module(module)
    finally:
        if sys.path and sys.path[0] == folder:
            sys.path.pop(0)
    return module


def _imported_as(path: Path) -> Any:
    """The module of sys.modules that the user's code imported from this file, if any
    (gradscope's own loads of it are run again: the file may have changed since)."""
    real = path.resolve()
    for name, module in list(sys.modules.items()):
        where = getattr(module, "__file__", None)
        if (isinstance(where, str) and where.endswith(real.name)
                and not name.startswith("_gradscope_user_") and Path(where).resolve() == real):
            return module
    return None


def _load_module(name: str, base: Path | None) -> Any:
    folder = str(base or Path.cwd())
    sys.path.insert(0, folder)
    try:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            raise UsageError(f"no module named {name!r} (looked in {folder} and sys.path); a "
                             "target is file.py:NAME or package.module:NAME")
        with user_code(f"import of {name}"), registering():
            return importlib.import_module(name)
    finally:
        if sys.path and sys.path[0] == folder:
            sys.path.pop(0)


def candidates_in(module: Any) -> list[str]:
    out = []
    for key, value in vars(module).items():
        if key.startswith("_"):
            continue
        if inspect.isclass(value) and issubclass(value, torch.autograd.Function | torch.nn.Module):
            if value.__module__ == module.__name__:
                out.append(key)
        elif isinstance(value, torch.nn.Module) or (
                inspect.isfunction(value) and value.__module__ == module.__name__):
            out.append(key)
    return sorted(out)
