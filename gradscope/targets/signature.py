"""The parameters of a Python target's forward, read with `inspect`: which are tensors (inputs),
which are numbers or flags (annotated), which are keyword-only, and where more positional
arguments are taken."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

SCALAR_ANNOTATIONS = ("float", "int", "bool", "str", "complex", "list", "tuple")


@dataclass
class Param:
    name: str
    default: Any = inspect.Parameter.empty
    annotation: Any = inspect.Parameter.empty
    keyword: bool = False  # keyword-only: passed by name

    @property
    def scalar(self) -> str | None:
        """The name of a non-tensor annotation (float, int, bool, str), else None."""
        note = self.annotation
        name = note if isinstance(note, str) else getattr(note, "__name__", None)
        return name if name in SCALAR_ANNOTATIONS else None


OPEN = Param("*")  # the end of a parameter list that takes more positional arguments


def signature(fn: Callable[..., Any], skip: int, text: str) -> list[Param]:
    """forward's parameters (ctx/self skipped); OPEN last where more positional arguments are
    taken (`*args`, or a builtin whose signature cannot be read): the API's arguments name
    them input0, input1, …"""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # builtins such as torch.sigmoid
        return [OPEN]
    params = []
    for p in list(sig.parameters.values())[skip:]:
        if p.kind is p.VAR_KEYWORD:
            continue
        if p.kind is p.VAR_POSITIONAL:
            params.append(OPEN)
            continue
        params.append(Param(p.name, p.default, p.annotation, p.kind is p.KEYWORD_ONLY))
    return params
