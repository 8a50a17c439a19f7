"""Markers a user puts in their own code: `@gradscope.surrogate("reason")` on an
autograd.Function, a function or an nn.Module declares that its backward departs from the
derivative on purpose; `reference=` adds its intended form, a function whose own gradient the
backward must then match element by element. It only sets `__gradscope_surrogate__` (and
`__gradscope_surrogate_reference__`), which code that does not import gradscope may set itself
(`__gradscope_surrogate__ = "straight-through"`). Imports nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

MARKER = "__gradscope_surrogate__"
REFERENCE = "__gradscope_surrogate_reference__"
DEFAULT_REASON = "declared in code"

T = TypeVar("T")


def surrogate(reason: str | Any = DEFAULT_REASON, *,
              reference: Callable[..., Any] | None = None) -> Any:
    """Declare a deliberate surrogate gradient: `@surrogate("straight-through estimator")`
    or bare `@surrogate`. gradscope then reports that object's mismatches as `surrogate`,
    naming how they relate to the derivative; every other check still applies.

    `reference`: the intended form, a function taking the same arguments as the forward
    (a Function's without ctx) whose gradient is the surrogate meant, such as
    `reference=torch.nn.functional.hardtanh` for sign's gated straight-through estimator or
    `reference=lambda v: v / (1 + 25 * v.abs())` for a fast-sigmoid spike. The backward is
    then compared with that gradient at every element, and fails where it differs."""
    if not isinstance(reason, str):  # used bare: @gradscope.surrogate
        return _mark(reason, DEFAULT_REASON, reference)

    def decorate(obj: T) -> T:
        return _mark(obj, reason or DEFAULT_REASON, reference)

    return decorate


def _mark(obj: T, reason: str, reference: Callable[..., Any] | None) -> T:
    if reference is not None and not callable(reference):
        raise TypeError(f"surrogate(reference=...) takes a function, got {reference!r}")
    setattr(obj, MARKER, reason)
    if reference is not None:  # (on a class: never bound to its instances as a method)
        setattr(obj, REFERENCE, staticmethod(reference) if isinstance(obj, type) else reference)
    return obj


def marker_of(obj: Any) -> str | None:
    """The reason an object declares, or None (a false/None marker declares nothing)."""
    value = getattr(obj, MARKER, None) if obj is not None else None
    if value is None or value is False:
        return None
    return value if isinstance(value, str) and value else DEFAULT_REASON


def reference_of(obj: Any) -> Callable[..., Any] | None:
    """The intended form an object declares for its surrogate, or None."""
    if marker_of(obj) is None:
        return None
    value = getattr(obj, REFERENCE, None)
    return value if callable(value) else None


__all__ = ["MARKER", "REFERENCE", "marker_of", "reference_of", "surrogate"]
