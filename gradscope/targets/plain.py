"""A plain function (or any callable that is not a class) as a target. The modules it reaches —
a training-style `def loss(x): return model(x)...` over a global, a closure cell, a default
argument, a bound method's `self`, or a module passed as an argument (`def step(model, batch)`)
— are held as copies (closures.py), so their parameters are checked too."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import torch

from gradscope.targets.closures import holder
from gradscope.targets.code import CodeTarget
from gradscope.targets.signature import signature


class CallableTarget(CodeTarget):
    def hold_modules(self) -> None:
        """Copies of the modules the function reaches or takes, their parameters checked."""
        given = {n: v for n, v in self.args.items() if isinstance(v, torch.nn.Module)}
        held, note = holder(self.obj, given)
        if held is not None:
            self.module, self.owned = held, True
            self.take_parameters()
        self.notes += [note] if note else []


def build(obj: Any, text: str, args: Mapping[str, Any], init: Mapping[str, Any]
          ) -> CallableTarget | None:
    if not callable(obj) or inspect.isclass(obj):
        return None
    return CallableTarget(text, "function", obj, signature(obj, 0, text), args)
