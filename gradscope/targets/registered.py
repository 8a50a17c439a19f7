"""Gradient hooks the user's code registers before any check runs: a parameter's hook in a
module's `__init__` (`self.w.register_hook(clip)`) and a module's backward hooks
(`register_full_backward_hook`, `register_full_backward_pre_hook`, `register_backward_hook`).
While gradscope imports the user's file or builds a module class, each registration is made
with the hook wrapped (`WatchedHook`): the wrapper knows the file and line that registered it and,
while a recording is open (features/inplace/calls.py), reports what backward gave it and what it
returned.

A hook on a tensor lives on that tensor object: a deep copy of the module (gradscope checks
copies) or `torch.func.functional_call` (gradscope differentiates its own leaves) drops it, and
autograd would be checked without the hook training runs. `deep_copy` carries the recorded
hooks over to the copy's tensors, and `carry` registers them on the leaves a check
differentiates. Modules or tensors built before gradscope ran (the Python API) are not seen."""

from __future__ import annotations

import copy
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import torch

from gradscope.targets.oldstyle import own_static, patched
from gradscope.usercode import calling_site

# what backward gave a hook and what it returned, one (given, returned) pair per tensor
Report = Callable[["WatchedHook", list[tuple[torch.Tensor | None, Any]]], None]
_SINK: ContextVar[Report | None] = ContextVar("gradscope_hook_sink", default=None)

# id(tensor) → (a weak reference to it, its recorded hooks): Tensor's `==` is elementwise, so a
# WeakKeyDictionary cannot hold tensors
_ON: dict[int, tuple[weakref.ref, list[WatchedHook]]] = {}
_CARRIED: dict[int, weakref.ref] = {}  # leaves `carry` already hooked


@dataclass(eq=False)  # (a hook is itself: compared and hashed by identity)
class WatchedHook:
    """A user's gradient hook as registered: the hook, where (`file.py:LINE`) and how
    (`tensor`: fn(grad); `module`: fn(module, grad_input, grad_output) → grad_input;
    `module pre`: fn(module, grad_output) → grad_output)."""

    hook: Callable[..., Any]
    where: str
    kind: str

    @property
    def name(self) -> str:
        return getattr(self.hook, "__qualname__", None) or type(self.hook).__name__

    def __call__(self, *args: Any) -> Any:
        out = self.hook(*args)
        report = _SINK.get()
        if report is not None:
            given = args[0] if self.kind == "tensor" else args[1]
            report(self, _pairs(given, out, self.kind == "tensor"))
        return out


def _pairs(given: Any, out: Any, single: bool) -> list[tuple[torch.Tensor | None, Any]]:
    """(given, returned) per tensor: None returned leaves the gradient as it was."""
    if single:
        return [(given, out)]
    given = tuple(given)
    outs = tuple(out) if isinstance(out, tuple | list) else (None,) * len(given)
    return list(zip(given, outs, strict=False))


@contextmanager
def reporting(report: Report) -> Iterator[None]:
    """Every WatchedHook called while inside reports to `report`."""
    token = _SINK.set(report)
    try:
        yield
    finally:
        _SINK.reset(token)


def _watched(hook: Callable[..., Any], kind: str) -> WatchedHook:
    return hook if isinstance(hook, WatchedHook) else WatchedHook(hook, calling_site(), kind)


def _tensor_register(original: Callable[..., Any]) -> Callable[..., Any]:
    def register_hook(self: torch.Tensor, hook: Callable[..., Any]) -> Any:
        watched = _watched(hook, "tensor")
        _record(self, watched)
        return original(self, watched)
    return register_hook


def _module_register(original: Callable[..., Any], kind: str) -> Callable[..., Any]:
    def register(self: torch.nn.Module, hook: Callable[..., Any], *args: Any, **kwargs: Any
                 ) -> Any:
        watched = _watched(hook, kind)
        return original(self, watched, *args, **kwargs)
    return register


@contextmanager
def registering() -> Iterator[None]:
    """Hooks registered while inside (importing the user's file, building a module) are
    registered as WatchedHook and, on tensors, recorded for `deep_copy` and `carry`."""
    module = torch.nn.Module
    changes: list[tuple[type, str, Any]] = [
        (torch.Tensor, "register_hook", _tensor_register(own_static(torch.Tensor,
                                                                    "register_hook")))]
    for name, kind in (("register_full_backward_hook", "module"),
                       ("register_backward_hook", "module"),
                       ("register_full_backward_pre_hook", "module pre")):
        changes.append((module, name, _module_register(own_static(module, name), kind)))
    with patched(changes):
        yield


def _record(tensor: torch.Tensor, watched: WatchedHook) -> None:
    key = id(tensor)
    entry = _ON.get(key)
    if entry is None or entry[0]() is not tensor:
        entry = (weakref.ref(tensor, lambda _, key=key: _ON.pop(key, None)), [])
        _ON[key] = entry
    entry[1].append(watched)


def hooks_on(tensor: torch.Tensor) -> list[WatchedHook]:
    """The recorded hooks of this tensor object (none for tensors gradscope never saw)."""
    entry = _ON.get(id(tensor))
    return list(entry[1]) if entry is not None and entry[0]() is tensor else []


def deep_copy(module: torch.nn.Module) -> torch.nn.Module:
    """copy.deepcopy, with each recorded tensor hook carried to the tensor's copy."""
    return deep_copy_all({"": module})[""]


def deep_copy_all(modules: Mapping[str, torch.nn.Module], share_parameters: bool = False
                  ) -> dict[str, torch.nn.Module]:
    """Copies of several modules made together (one deepcopy memo), so that what they share
    stays shared — a module reached as `model` and as `model.encoder`, or a tied weight, is one
    object among the copies too — with each recorded tensor hook carried to its copy.

    `share_parameters`: each plain Parameter's copy is a new Parameter over the same storage
    (for copies whose parameters gradscope swaps out with functional_call and never writes:
    copying them would hold the model twice; converting the copy to another dtype gives it
    storage of its own)."""
    memo: dict[int, Any] = {}
    if share_parameters:
        for module in modules.values():
            for p in module.parameters():
                if type(p) is torch.nn.Parameter:
                    memo[id(p)] = torch.nn.Parameter(p.detach(), requires_grad=p.requires_grad)
    out = {name: copy.deepcopy(module, memo) for name, module in modules.items()}
    for module in modules.values():
        for tensor in [*module.parameters(), *module.buffers()]:
            twin = memo.get(id(tensor))
            if isinstance(twin, torch.Tensor) and not hooks_on(twin):
                for watched in hooks_on(tensor):
                    _record(twin, watched)
    return out


def parameters_once(module: torch.nn.Module) -> tuple[dict[str, torch.nn.Parameter],
                                                       dict[str, list[str]]]:
    """Each parameter once, and for those reached by several names the others. A module
    reached by several paths (`inner` and `model.0`) is named by its shortest (fewest dots, then
    fewest characters); a parameter two modules share (a tied embedding) by the first owner in
    definition order, as named_parameters names it. torch.func.functional_call ties the other
    names to the one given."""
    paths: dict[int, str] = {}
    for path, sub in module.named_modules(remove_duplicate=False):
        best = paths.get(id(sub))
        if best is None or _shorter(path, best):
            paths[id(sub)] = path
    every: dict[int, list[str]] = {}
    for name, p in module.named_parameters(remove_duplicate=False):
        every.setdefault(id(p), []).append(name)
    chosen: dict[str, torch.nn.Parameter] = {}
    others: dict[str, list[str]] = {}
    for name, p in module.named_parameters():  # (first owner, definition order)
        owner, _, leaf = name.rpartition(".")
        path = paths[id(module.get_submodule(owner))]
        short = f"{path}.{leaf}" if path else leaf
        chosen[short] = p
        rest = [n for n in every[id(p)] if n != short]
        if rest:
            others[short] = rest
    return chosen, others


def _shorter(a: str, b: str) -> bool:
    return (a.count("."), len(a), a) < (b.count("."), len(b), b)


def hooks_by_name(module: torch.nn.Module,
                  named: Mapping[str, torch.Tensor] | None = None) -> dict[str, list[WatchedHook]]:
    """Parameter name (parameters_once's, or `named` where the caller has them) → its recorded
    hooks, for the parameters that have any."""
    named = parameters_once(module)[0] if named is None else named
    found = {name: hooks_on(p) for name, p in named.items()}
    return {name: hooks for name, hooks in found.items() if hooks}


def carry(hooks: Mapping[str, list[WatchedHook]], values: Mapping[str, torch.Tensor]) -> None:
    """Register each parameter's recorded hooks on the leaf standing in for it (once per
    leaf; values that do not require grad, as finite differences use, get none)."""
    for name, watched in hooks.items():
        leaf = values.get(name)
        if leaf is None or not leaf.requires_grad:
            continue
        key = id(leaf)
        seen = _CARRIED.get(key)
        if seen is not None and seen() is leaf:
            continue
        _CARRIED[key] = weakref.ref(leaf, lambda _, key=key: _CARRIED.pop(key, None))
        for w in watched:
            leaf.register_hook(w)
