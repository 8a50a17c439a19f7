"""An `nn.Module` as a target: a class (built with `--init` literals) or an instance, checked
on gradscope's own copy (a forward in train mode updates buffers such as batch norm's running
statistics); its parameters are inputs with role `parameter`."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import torch

from gradscope.errors import UsageError
from gradscope.targets.closures import copied
from gradscope.targets.code import CodeTarget
from gradscope.targets.registered import registering
from gradscope.targets.signature import signature
from gradscope.usercode import known_hint, user_code


class ModuleTarget(CodeTarget):
    takes_init = True


def build(obj: Any, text: str, args: Mapping[str, Any], init: Mapping[str, Any]
          ) -> ModuleTarget | None:
    if inspect.isclass(obj) and issubclass(obj, torch.nn.Module):
        shown = ", ".join(f"{k}={v!r}" for k, v in init.items())
        with user_code(f"{obj.__name__}({shown})", hint=lambda exc: _init_hint(obj, exc)), \
                registering():
            instance = obj(**init)
        return _target(instance, text, args, built=True)
    if isinstance(obj, torch.nn.Module):
        if init:
            raise UsageError(f"{text} is already an nn.Module instance; --init is for classes")
        return _target(obj, text, args)
    return None


def _target(module: torch.nn.Module, text: str, args: Mapping[str, Any],
            built: bool = False) -> ModuleTarget:
    # (a torch.compile'd module forwards *args: its parameters are its original module's;
    # looked up statically, never through a user's __getattr__)
    inner = inspect.getattr_static(module, "_modules", {}).get("_orig_mod", module)
    target = ModuleTarget(text, "module", module, signature(inner.forward, 0, text), args)
    # a copy: a forward in train mode updates buffers (batch norm's running statistics)
    own, note = (module, "") if built else copied(module)
    target.module, target.owned = own, built or own is not module
    target.notes += [note] if note else []
    target.take_parameters()
    if any(p.grad is not None for p in module.parameters()):
        target.notes.append("the module's parameters already held .grad; gradscope works on its "
                            "own copies, so those .grad values were neither used nor changed")
    return target


def _init_hint(cls: type, exc: BaseException) -> str | None:
    """The hint for what __init__ raised, then — where its source never calls
    super().__init__() — that too, as the next thing to fix (never instead of the first)."""
    hint = known_hint(exc)
    if hint and "super().__init__()" in hint:
        return hint
    try:
        source = inspect.getsource(cls.__init__)
    except (OSError, TypeError):
        return hint
    if "super(" in source or "Module.__init__" in source:
        return hint
    if hint:
        return f"{hint}; then: __init__ never calls super().__init__(), which an nn.Module " \
               "needs before anything else"
    if not isinstance(exc, AttributeError):  # (a missing super().__init__() shows as one)
        return None
    return ("did you call super().__init__()? an nn.Module's __init__ must call it before "
            "anything else")
