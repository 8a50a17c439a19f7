"""A `torch.autograd.Function` subclass as a target: called through `.apply`, its inputs named
after `forward`'s parameters (ctx excluded, or not there with `setup_context`)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

import torch

from gradscope.targets.code import CodeTarget
from gradscope.targets.oldstyle import has_setup_context
from gradscope.targets.signature import signature


class FunctionTarget(CodeTarget):
    def call(self, args: list[Any], kwargs: dict[str, Any]) -> Any:
        return self.obj.apply(*args)

    @property
    def callee(self) -> Callable[..., Any]:
        return self.obj.apply

    @property
    def own_function(self) -> type | None:
        return self.obj


def build(obj: Any, text: str, args: Mapping[str, Any], init: Mapping[str, Any]
          ) -> FunctionTarget | None:
    if not (inspect.isclass(obj) and issubclass(obj, torch.autograd.Function)):
        return None
    params = signature(obj.forward, skip=0 if has_setup_context(obj) else 1, text=text)
    return FunctionTarget(text, "autograd_function", obj, params, args)
