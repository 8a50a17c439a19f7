"""Old-style custom Functions (ctx in `forward`) evaluated for their values only, so that finite
differences can batch them with `torch.func.vmap`.

torch.func refuses an `autograd.Function` without `setup_context`, which left a model using one
differenced one column at a time (about 6× slower). Finite differences need no backward, and
`Function.apply`'s value is its `forward`'s (run without grad), so while the target is evaluated
for values, each such class found in its autograd graph has `apply` call `forward` directly
with a stand-in ctx. The classes are restored when the evaluation returns or raises; autograd's
own evaluations never see the stand-in."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch

from gradscope.tensors import grad_nodes


def has_setup_context(cls: type) -> bool:
    own = getattr(cls, "setup_context", None)
    base = getattr(torch.autograd.Function, "setup_context", None)
    return own is not None and own is not base


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
    """The Function classes without setup_context whose nodes are in `output`'s graph (a
    custom Function's node class is named after it: `GELUBackward` for `GELU`; a same-named
    class elsewhere is included too, which is harmless: its apply gives the same values)."""
    names = {type(node).__name__ for node in grad_nodes(output.grad_fn)}
    return [cls for cls in set(_subclasses(torch.autograd.Function))
            if f"{cls.__name__}Backward" in names and not has_setup_context(cls)]


def _direct(cls: Any, *args: Any) -> Any:
    with torch.no_grad():  # as apply runs it
        return cls.forward(_Ctx(args), *args)


@contextmanager
def values_only(classes: Sequence[type]) -> Iterator[None]:
    """While inside, `cls.apply(...)` is `cls.forward(ctx, ...)` for each class."""
    saved = [(cls, vars(cls).get("apply")) for cls in classes]
    try:
        for cls in classes:
            cls.apply = classmethod(_direct)  # type: ignore[attr-defined]
        yield
    finally:
        for cls, own in saved:
            if own is None:
                delattr(cls, "apply")
            else:
                cls.apply = own  # type: ignore[attr-defined]
