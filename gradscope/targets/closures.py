"""Modules a plain function reaches — a training-style `def loss(x): return model(x)...` over a
global, a closure cell, a default argument or a bound method's `self` — so that their
parameters are checked too, on copies: the function is rebuilt to use the copies, which a
wrapper module holds, whose parameter slots gradscope fills (held.py). The user's
modules are never touched. Also what the modules' normalisation layers do in train mode: a note,
and running statistics left alone while finite differences evaluate values.

Only the names the function itself uses are followed: a helper it calls that reaches a module
through its own globals still sees the original (the notes say which modules were found)."""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import torch

from gradscope.errors import UsageError
from gradscope.option_text import TopLevel
from gradscope.targets.registered import deep_copy, deep_copy_all


def reached(fn: Callable[..., Any]) -> dict[str, torch.nn.Module]:
    """name → module for every nn.Module `fn` reaches directly."""
    found: dict[str, torch.nn.Module] = {}
    owner = getattr(fn, "__self__", None)
    if inspect.ismethod(fn) and isinstance(owner, torch.nn.Module):
        found["self"] = owner
        fn = fn.__func__
    code = getattr(fn, "__code__", None)
    if code is None:
        return found
    for name in code.co_names:
        value = getattr(fn, "__globals__", {}).get(name)
        if isinstance(value, torch.nn.Module):
            found[name] = value
    for name, cell in zip(code.co_freevars, fn.__closure__ or (), strict=False):
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if isinstance(value, torch.nn.Module):
            found[name] = value
    params = list(inspect.signature(fn).parameters.values())
    for param in params:
        if isinstance(param.default, torch.nn.Module):
            found[param.name] = param.default
    return found


def rebuilt(fn: Callable[..., Any], copies: Mapping[str, torch.nn.Module]) -> Callable[..., Any]:
    """`fn` with every module it reaches replaced by its copy (same code, new bindings)."""
    if inspect.ismethod(fn) and "self" in copies:
        return types.MethodType(rebuilt(fn.__func__, copies), copies["self"])
    code = fn.__code__
    names = set(code.co_names)
    scope = dict(fn.__globals__)
    scope.update({k: v for k, v in copies.items() if k in names})
    cells = tuple(types.CellType(copies[name]) if name in copies else cell
                  for name, cell in zip(code.co_freevars, fn.__closure__ or (), strict=False))
    defaults = fn.__defaults__
    if defaults:
        positional = [p for p in inspect.signature(fn).parameters.values()
                      if p.default is not inspect.Parameter.empty
                      and p.kind is not p.KEYWORD_ONLY]
        defaults = tuple(copies.get(p.name, p.default) for p in positional)
    kwdefaults = {k: copies.get(k, v) for k, v in (fn.__kwdefaults__ or {}).items()} or None
    new = types.FunctionType(code, scope, fn.__name__, defaults, cells or None)
    new.__kwdefaults__ = kwdefaults
    new.__qualname__ = fn.__qualname__
    return new


class Holder(torch.nn.Module):
    """The copies, as submodules named after how the function reaches them (`model`), and
    the rebuilt function as forward: their parameter slots are what gradscope fills. A name
    that is already an attribute of every Module (a global module called `training`, `to`,
    `forward`) is held as `name_`."""

    def __init__(self, fn: Callable[..., Any], copies: Mapping[str, torch.nn.Module]) -> None:
        super().__init__()
        self._rebuilt = fn  # (not `fn`: the user's own module may be called that)
        for name, module in copies.items():
            self.add_module(name if not hasattr(self, name) else f"{name}_", module)

    @property
    def function(self) -> Callable[..., Any]:
        """The rebuilt function, which reads the copies."""
        return self._rebuilt

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self._rebuilt(*args, **kwargs)


def holder(fn: Callable[..., Any], given: Mapping[str, torch.nn.Module] | None = None
           ) -> tuple[Holder | None, str]:
    """A Holder of copies of the modules `fn` reaches and of those `given` as its arguments
    (`def step(model, batch)`: held under the parameter's name), and a note (None, "" when
    none)."""
    found = {**reached(fn), **(given or {})}
    if not found:
        return None, ""
    try:
        copies = deep_copy_all(found, share_parameters=True)  # (swapped, never written)
    except Exception as exc:  # a module that cannot be copied: its parameters stay unchecked
        return None, (f"the function reaches module(s) {', '.join(found)}, which could not be "
                      f"copied ({type(exc).__name__}); their parameters are not checked")
    first = next(iter(found))
    example = next((f"{first}.{n}" for n, _ in copies[first].named_parameters()),
                   f"{first}.weight")
    note = (f"the function reaches module(s) {', '.join(found)}: their parameters are checked "
            f"too, on copies (named like `{example}`; the originals are not changed)")
    same = _same_modules(found)
    if same:
        note += f"; {'; '.join(same)}: one module, copied once and checked once"
    return Holder(rebuilt(fn, copies), copies), note


def _same_modules(found: Mapping[str, torch.nn.Module]) -> list[str]:
    """`inner is model.0`, `net is model`: names the function uses for one module object."""
    paths: dict[int, list[str]] = {}
    for name, module in found.items():
        for sub, m in module.named_modules(remove_duplicate=False):
            paths.setdefault(id(m), []).append(f"{name}.{sub}" if sub else name)
    out = []
    for name, module in found.items():
        others = [p for p in dict.fromkeys(paths[id(module)]) if p != name]
        if others:
            out.append(f"{name} is {', '.join(others[:3])}")
    return out


def copied(module: torch.nn.Module) -> tuple[torch.nn.Module, str]:
    """A deep copy of a module given as the target, and a note when it cannot be copied (the
    original is used then; a forward in train mode updates its buffers)."""
    try:
        return deep_copy(module), ""
    except Exception as exc:
        return module, (f"the module could not be copied ({type(exc).__name__}), so it was "
                        "evaluated itself: in train mode its buffers (batch norm running "
                        "statistics) were updated by gradscope's evaluations")


def _tracks(m: torch.nn.Module) -> bool:
    """A batch norm in train mode tracking running statistics (a module whose __getattr__
    raises for what it lacks is none)."""
    try:
        return bool(m.training and getattr(m, "track_running_stats", False)
                    and isinstance(getattr(m, "running_mean", None), torch.Tensor))
    except Exception:
        return False


def batch_statistics(root: torch.nn.Module) -> list[str]:
    """A note naming the batch-norm layers that will normalise with the batch's own
    statistics (train mode, running statistics tracked)."""
    found = [name or type(m).__name__ for name, m in root.named_modules() if _tracks(m)]
    if not found:
        return []
    shown = ", ".join(found[:4]) + (f" and {len(found) - 4} more" if len(found) > 4 else "")
    return [f"batch norm in train mode ({shown}): it normalises with the batch's own "
            "statistics, so each gradient includes every sample's effect through the batch "
            "mean and variance; its running statistics are updated on gradscope's copy only; "
            "--eval checks it with the running statistics"]


def top_level(obj: Any, args: Mapping[str, Any], text: str) -> dict[str, Any]:
    """`args` with each TopLevel name (`--arg model=net`) replaced by the object of that name
    at the top level of the file that defines `obj`."""
    scope = getattr(obj, "__globals__", None)
    if scope is None:
        module = inspect.getmodule(obj)
        scope = vars(module) if module is not None else {}
    where = text.rpartition(":")[0] or f"{text}'s module"
    out = dict(args)
    for name, value in args.items():
        if not isinstance(value, TopLevel):
            continue
        found = scope.get(value.name)
        if not isinstance(found, torch.nn.Module):  # a model by name, nothing else
            what = f"is not defined at the top of {where}" if value.name not in scope else \
                f"at the top of {where} is a {type(found).__name__}, not an nn.Module"
            raise UsageError(f"--arg {name}={value.name}: `{value.name}` {what}; --arg takes a "
                             "Python literal, or the name of an nn.Module defined there")
        out[name] = found
    return out


_STATISTICS = ("running_mean", "running_var", "num_batches_tracked", "track_running_stats")


def tracking_layers(root: torch.nn.Module | None) -> list[torch.nn.Module]:
    """Normalisation layers in train mode that track running statistics (batch norm,
    instance norm with tracking)."""
    return [m for m in (root.modules() if root is not None else ()) if _tracks(m)]


@contextmanager
def batch_statistics_only(layers: list[torch.nn.Module]) -> Iterator[None]:
    """While inside, the `tracking_layers` stop tracking running statistics: their output is
    the same (train mode normalises with the batch's own statistics), and `torch.func.vmap`
    refuses a layer that would update unbatched running statistics in place from a batch of
    evaluations — which left every CNN with batch norm differenced one column at a time.
    Restored on exit."""
    saved = [(m, {k: getattr(m, k, None) for k in _STATISTICS}) for m in layers]
    try:
        for m in layers:
            m.running_mean = m.running_var = m.num_batches_tracked = None
            m.track_running_stats = False
        yield
    finally:
        for m, values in saved:
            for k, v in values.items():
                setattr(m, k, v)
