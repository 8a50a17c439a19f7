"""Markers a user puts in their own code: `@gradscope.surrogate("reason")` on an
autograd.Function, a function or an nn.Module declares that its backward departs from the
derivative on purpose. It only sets `__gradscope_surrogate__`, which code that does not import
gradscope may set itself (`__gradscope_surrogate__ = "straight-through"`). Imports nothing."""

from __future__ import annotations

from typing import Any, TypeVar

MARKER = "__gradscope_surrogate__"
DEFAULT_REASON = "declared in code"

T = TypeVar("T")


def surrogate(reason: str | Any = DEFAULT_REASON) -> Any:
    """Declare a deliberate surrogate gradient: `@surrogate("straight-through estimator")`
    or bare `@surrogate`. gradscope then reports that object's mismatches as `surrogate`,
    naming how they relate to the derivative; every other check still applies."""
    if not isinstance(reason, str):  # used bare: @gradscope.surrogate
        return _mark(reason, DEFAULT_REASON)

    def decorate(obj: T) -> T:
        return _mark(obj, reason or DEFAULT_REASON)

    return decorate


def _mark(obj: T, reason: str) -> T:
    setattr(obj, MARKER, reason)
    return obj


def marker_of(obj: Any) -> str | None:
    """The reason an object declares, or None (a false/None marker declares nothing)."""
    value = getattr(obj, MARKER, None) if obj is not None else None
    if value is None or value is False:
        return None
    return value if isinstance(value, str) and value else DEFAULT_REASON


__all__ = ["MARKER", "marker_of", "surrogate"]
