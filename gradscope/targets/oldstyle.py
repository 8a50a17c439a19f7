"""Old-style custom Functions (ctx in `forward`) evaluated for their values only, so that finite
differences can batch them with `torch.func.vmap`.

torch.func refuses an `autograd.Function` without `setup_context`, which left a model using one
differenced one column at a time (about 6× slower). Finite differences need no backward, and
`Function.apply`'s value is its `forward`'s (run without grad), so while the target is evaluated
for values, each such class found in its autograd graph is made a functorch-style Function for
the moment: its `forward` runs the original with a stand-in ctx, `setup_context` does nothing,
and vmap generates its rule. The class attributes are what change, not `apply`, because code
keeps `apply` bound long before (`relu = MyReLU.apply`, `self.act = MyReLU.apply`), and a
bound `apply` still looks `forward` and `setup_context` up on the class at every call. The
classes are restored when the evaluation returns or raises; autograd's own evaluations never
see the stand-in."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch

from gradscope.tensors import grad_nodes


def has_setup_context(cls: type) -> bool:
    own = getattr(cls, "setup_context", None)
    base = getattr(torch.autograd.Function, "setup_context", None)
    return own is not None and own is not base


def forward_names(cls: type) -> list[str]:
    """The names a Function's forward gives its arguments: its parameters, ctx left out
    unless the Function has setup_context (whose forward takes none); [] where unreadable."""
    try:
        names = list(inspect.signature(cls.forward).parameters)  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        return []
    return names if has_setup_context(cls) else names[1:]


class _Ctx:
    """What `forward(ctx, ...)` may use of ctx; what it saves is for a backward never run."""

    def __init__(self, args: tuple[Any, ...]) -> None:
        self.needs_input_grad = tuple(isinstance(a, torch.Tensor) and a.requires_grad
                                      for a in args)

    def save_for_backward(self, *tensors: Any) -> None:
        self.saved_tensors = tensors

    def save_for_forward(self, *tensors: Any) -> None:
        pass

    def mark_dirty(self, *tensors: Any) -> None:
        pass

    def mark_non_differentiable(self, *tensors: Any) -> None:
        pass

    def set_materialize_grads(self, value: bool) -> None:
        pass


def _subclasses(cls: type) -> Iterator[type]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def old_style(output: torch.Tensor) -> list[type]:
    """The Function classes without setup_context whose nodes are in `output`'s graph: the
    class a node names (`_forward_cls`), else those named after the node (`GELUBackward` for
    `GELU`; a same-named class elsewhere is harmless: its apply gives the same values). Only
    those: code that makes a class per call (fast-soft-sort's wrap_class) leaves hundreds of
    same-named ones behind, each patched and restored at every evaluation."""
    nodes = list(grad_nodes(output.grad_fn))
    own = [cls for node in nodes for cls in [getattr(node, "_forward_cls", None)]
           if isinstance(cls, type)]
    named = {type(node).__name__ for node in nodes
             if not isinstance(getattr(node, "_forward_cls", None), type)}
    found = dict.fromkeys([*own, *(cls for cls in _subclasses(torch.autograd.Function)
                                   if f"{cls.__name__}Backward" in named)])
    return [cls for cls in found if not has_setup_context(cls)]


_ABSENT = object()


def own_static(cls: type, name: str) -> Callable[..., Any]:
    """The function behind `cls.name` as the class defines or inherits it, called as `apply`
    calls it: a staticmethod's function, a classmethod bound to `cls` (a library writes
    `forward(cls, ctx, ...)`); looked up in the class dicts, so that a patched parent is not
    picked up."""
    value = next(vars(b)[name] for b in cls.__mro__ if name in vars(b))
    if isinstance(value, classmethod):
        return value.__get__(None, cls)
    return value.__func__ if isinstance(value, staticmethod) else value


@contextmanager
def patched(changes: Sequence[tuple[type, str, Any]]) -> Iterator[None]:
    """Each (class, attribute, value) set while inside; every class's own attributes are
    restored afterwards (an inherited one by deleting the class's own again)."""
    saved = [(cls, name, vars(cls).get(name, _ABSENT)) for cls, name, _ in changes]
    try:
        for cls, name, value in changes:
            setattr(cls, name, value)
        yield
    finally:
        for cls, name, own in reversed(saved):
            if own is _ABSENT:
                delattr(cls, name)
            else:
                setattr(cls, name, own)


def _values_forward(forward: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: Any) -> Any:
        return forward(_Ctx(args), *args)
    return run


def forward_itself(cls: type) -> Callable[..., Any]:
    """The class's own `forward` as a plain function of its arguments (an old-style one given
    a stand-in ctx): called in grad mode, autograd differentiates what it computes — the
    derivative its backward is meant to give, without its backward."""
    forward = own_static(cls, "forward")
    return forward if has_setup_context(cls) else _values_forward(forward)


def _nothing(ctx: Any, inputs: Any, output: Any) -> None:
    return None


@contextmanager
def values_only(classes: Sequence[type]) -> Iterator[None]:
    """While inside, each class computes `forward(ctx, ...)`'s values as a functorch-style
    Function (vmap generates its rule), whichever way its `apply` is reached."""
    changes: list[tuple[type, str, Any]] = []
    for cls in classes:  # (every original looked up before anything is patched)
        changes += [(cls, "forward", staticmethod(_values_forward(own_static(cls, "forward")))),
                    (cls, "setup_context", staticmethod(_nothing)),
                    (cls, "generate_vmap_rule", True)]
    with patched(changes):
        yield
