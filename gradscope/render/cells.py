"""How numbers, shapes, indices and statuses are written in every text format (terminal
tables, markdown, plots): one format for all."""

from __future__ import annotations

import html
import math
import re
from collections.abc import Sequence
from typing import Any

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


# Text that comes from users (check names, targets, messages of their exceptions, their source
# lines) is shown, never interpreted: control characters (ESC sequences could restyle or
# rewrite a terminal) are spelled out, HTML is escaped in markdown, and what XML 1.0 cannot
# carry is dropped from JUnit.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_NOT_XML = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def printable(text: str) -> str:
    """Control characters (but newline and tab) as visible \\xNN escapes."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def md(text: str) -> str:
    """One markdown table cell or inline text: printable, HTML-escaped, and no pipe or
    backtick left to end a cell or start a code span."""
    escaped = html.escape(printable(text), quote=False).replace("\\", "\\\\")
    return escaped.replace("|", "\\|").replace("`", "\\`").replace("\n", " ")


def md_code(text: str) -> str:
    """Text for inside a markdown code span (no HTML there; a backtick would end it)."""
    return printable(text).replace("`", "ˋ").replace("|", "\\|").replace("\n", " ")


def fence(text: str) -> str:
    """A markdown code fence longer than any run of backticks in `text`."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def xml_safe(text: str) -> str:
    """`text` without the characters XML 1.0 forbids."""
    return _NOT_XML.sub("", text)
