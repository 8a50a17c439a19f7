"""How numbers, shapes, indices and statuses are written in every text format (terminal
tables, markdown, plots): one format for all."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

TABLE_ROWS = 24  # a tensor with more elements shows its worst rows only
WORST_ROWS = 12
STYLE = {"ok": "green", "mismatch": "bold red", "nondifferentiable": "yellow",
         "undefined": "magenta", "vanishing": "yellow", "surrogate": "cyan"}  # colour repeats
# the word, never replaces it



def fmt(x: Any, digits: int = 6) -> str:
    if x is None:
        return "—"
    if isinstance(x, str):
        return x
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
    return f"{x:.{digits}g}"


def flat(values: Any) -> list:
    if values is None:
        return []
    if not isinstance(values, list):
        return [values]
    out: list = []
    stack = [values]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(reversed(item))
        else:
            out.append(item)
    return out


def shape_text(shape: Sequence[int]) -> str:
    return str(tuple(shape))


def index_of(flat_index: int, shape: Sequence[int]) -> list[int]:
    out = []
    for n in reversed(shape):
        out.append(flat_index % n)
        flat_index //= n
    return list(reversed(out))


def index_text(index: Sequence[int]) -> str:
    return "()" if not index else ",".join(str(i) for i in index)
