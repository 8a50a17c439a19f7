"""The sides of a branch site, named by the values that took them: an expression op's pieces
by its argument's range in each (`x + 3 in [−3.37, −0.53]: 6`), user code's comparisons,
clamps, relus, abs and signs by the side of their threshold (recorded by the watched forward,
scopes.py). BranchSite (base.py) holds them; a site every element took the same side of is
one-sided, and a bug on its other side would go unseen."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

MAX_PIECES = 4  # pieces named one by one; the rest are counted together


def _n(x: float) -> str:
    return f"{x:.3g}".replace("-", "\u2212")


def pieces(ids: torch.Tensor, values: torch.Tensor, text: str
           ) -> tuple[tuple[str, int], ...]:
    """(label, count) per piece id, in the order of the argument's values."""
    ids, values = ids.reshape(-1), values.detach().double().reshape(-1)
    keep = torch.isfinite(ids.double()) & torch.isfinite(values)
    ids, values = ids[keep], values[keep]
    if not ids.numel():
        return ()
    # per piece at once (a piece per element, as sort's, would be quadratic one by one)
    _, inverse, counts = torch.unique(ids, return_inverse=True, return_counts=True)
    lo = torch.full((counts.numel(),), math.inf, dtype=values.dtype).scatter_reduce(
        0, inverse, values, "amin")
    hi = torch.full((counts.numel(),), -math.inf, dtype=values.dtype).scatter_reduce(
        0, inverse, values, "amax")
    order = torch.argsort(lo, stable=True)
    cut = float(lo[order[min(MAX_PIECES, order.numel()) - 1]])
    first = [int(k) for k in order[lo[order] <= cut]]  # the named ones, ties included
    found = []
    for k in first:
        a, b = float(lo[k]), float(hi[k])
        label = f"{text} = {_n(a)}" if a == b else f"{text} in [{_n(a)}, {_n(b)}]"
        found.append((a, label, int(counts[k])))
    found.sort()
    named = [(label, count) for _, label, count in found[:MAX_PIECES]]
    rest = order.numel() - len(named)
    if rest:
        named.append((f"{rest} more piece(s)", int(counts.sum()) - sum(c for _, c in named)))
    return tuple(named)


def _side_counts(x: torch.Tensor, at: Any = 0.0) -> tuple[int, int, int]:
    below = int((x < at).sum())
    equal = int((x == at).sum())
    return below, equal, x.numel() - below - equal


def _signs(x: torch.Tensor, args: tuple, kwargs: dict) -> tuple[tuple[str, int], ...]:
    below, zero, above = _side_counts(x)
    return (("< 0", below), ("= 0", zero), ("> 0", above))


def _clamp(x: torch.Tensor, args: tuple, kwargs: dict) -> tuple[tuple[str, int], ...]:
    lo = kwargs.get("min", args[1] if len(args) > 1 else None)
    hi = kwargs.get("max", args[2] if len(args) > 2 else None)
    under = (x < lo) if lo is not None else torch.zeros_like(x, dtype=torch.bool)
    over = (x > hi) if hi is not None else torch.zeros_like(x, dtype=torch.bool)
    inside = int((~under & ~over).sum())
    return (("below its min", int(under.sum())), ("inside", inside),
            ("above its max", int(over.sum())))


def _hardtanh(x: torch.Tensor, args: tuple, kwargs: dict) -> tuple[tuple[str, int], ...]:
    lo = kwargs.get("min_val", args[1] if len(args) > 1 else -1.0)
    hi = kwargs.get("max_val", args[2] if len(args) > 2 else 1.0)
    return _clamp(x, (x, lo, hi), {})


def _threshold(x: torch.Tensor, args: tuple, kwargs: dict) -> tuple[tuple[str, int], ...]:
    at = kwargs.get("threshold", args[1] if len(args) > 1 else 0.0)
    below, equal, above = _side_counts(x, at)
    return ((f"≤ {_n(float(at))}", below + equal), (f"> {_n(float(at))}", above))


def _compared(x: torch.Tensor, args: tuple, kwargs: dict, out: Any
              ) -> tuple[tuple[str, int], ...]:
    if not isinstance(out, torch.Tensor) or out.dtype != torch.bool:
        return ()
    true = int(out.sum())
    return (("true", true), ("false", out.numel() - true))


def _larger(x: torch.Tensor, args: tuple, kwargs: dict) -> tuple[tuple[str, int], ...]:
    other = args[1] if len(args) > 1 else kwargs.get("other")
    if other is None:
        return ()
    first = int((x > other).sum())
    tie = int((x == other).sum())
    return (("first larger", first), ("equal", tie), ("second larger", x.numel() - first - tie))


def _clamp_min(x: torch.Tensor, args: tuple, kwargs: dict) -> tuple[tuple[str, int], ...]:
    return _clamp(x, (x, args[1] if len(args) > 1 else kwargs.get("min")), {})


def _clamp_max(x: torch.Tensor, args: tuple, kwargs: dict) -> tuple[tuple[str, int], ...]:
    return _clamp(x, (x, None, args[1] if len(args) > 1 else kwargs.get("max")), {})


def _relu6(x: torch.Tensor, args: tuple, kwargs: dict) -> tuple[tuple[str, int], ...]:
    return _clamp(x, (x, 0.0, 6.0), {})


Side = Callable[[torch.Tensor, tuple, dict], tuple[tuple[str, int], ...]]
# user code's branching torch functions (by name) → the sides of their first argument
SIDES: dict[str, Side] = {
    **dict.fromkeys(("relu", "relu_", "abs", "sign", "leaky_relu", "prelu", "elu", "selu",
                     "celu", "rrelu", "hardshrink", "softshrink"), _signs),
    **dict.fromkeys(("clamp", "clamp_", "clip"), _clamp),
    "clamp_min": _clamp_min, "clamp_max": _clamp_max, "relu6": _relu6,
    **dict.fromkeys(("hardtanh", "hardtanh_"), _hardtanh),
    "threshold": _threshold,
    **dict.fromkeys(("maximum", "minimum", "fmax", "fmin"), _larger),
}
COMPARISONS = {"lt", "gt", "le", "ge", "eq", "ne", "less", "greater", "less_equal",
               "greater_equal", "__lt__", "__gt__", "__le__", "__ge__", "__eq__", "__ne__"}


def sides(name: str, args: tuple, kwargs: dict, out: Any) -> tuple[tuple[str, int], ...]:
    """The sides a user's branching torch call took (() when it is no branch on a tensor)."""
    first = args[0] if args else None
    if not isinstance(first, torch.Tensor) or not first.is_floating_point():
        return ()
    if name in COMPARISONS:
        return _compared(first, args, kwargs, out)
    side = SIDES.get(name)
    if side is None:
        return ()
    return side(first.detach(), args, kwargs)


def described(sides: tuple[tuple[str, int], ...]) -> str:
    """'true: 12 · false: 13' (the sides no element took left out)."""
    return " · ".join(f"{label}: {n:,}" for label, n in sides if n)
