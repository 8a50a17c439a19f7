"""How numbers, shapes, indices and statuses are written in every text format (terminal
tables, markdown, plots): one format for all."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from gradscope import escape
from gradscope.report.build import TABLE_ROWS, WORST_ROWS, flat  # noqa: F401  (re-exported)
from gradscope.report.status import Status


def style(status: Any) -> str:
    """The colour of a status word (it repeats the word, never replaces it)."""
    try:
        return Status(status).style
    except ValueError:
        return ""



def fmt(x: Any, digits: int = 6) -> str:
    if x is None:
        return "—"
    if isinstance(x, str):
        return x
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
    return f"{x:.{digits}g}"


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


# Text that comes from users is shown, never interpreted: gradscope/escape.py, one function
# per medium (these are its names in the renderers)
printable = escape.terminal
md = escape.markdown
md_code = escape.markdown_code
fence = escape.fence
xml_safe = escape.xml
