"""User text is data: one escaping function per medium it is shown in, used everywhere.

Names of classes, files, inputs, modules and parameters, check names, exception messages and
expressions come from users; shown, they are never read as markup or control:

* `terminal`: control characters (an ESC sequence could restyle or rewrite a terminal) spelled
  out as \\xNN, newline and tab kept (rich markup is never read from text at all: every console
  gradscope makes has markup off — render/console.py);
* `markdown` (inline text or a table cell), `markdown_code` (inside a code span), `fence`;
* `xml` (JUnit, SVG): what XML 1.0 cannot carry dropped, the rest escaped by the writer;
* `plot` (a matplotlib label), `html` (attribute or text).

Cheap to import (no torch): the command line's error lines use it.
"""

from __future__ import annotations

import html as _html
import re

# control characters, and the bidirectional overrides that make text read other than it is
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_NOT_XML = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_MARKDOWN = re.compile(r"([\\|`\[\]*])")  # (an underscore inside a name is no emphasis)


def terminal(text: str) -> str:
    """Control characters (but newline and tab) as visible \\xNN escapes."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 256
                        else f"\\u{ord(m.group()):04x}", text)


def markdown(text: str) -> str:
    """One markdown table cell or inline text: printable, HTML-escaped, and no character
    left that markdown reads (a link's brackets, emphasis, a pipe ending a cell, a backtick
    starting a code span); on one line."""
    escaped = _html.escape(terminal(text), quote=False)
    return _MARKDOWN.sub(r"\\\1", escaped).replace("\n", " ")


def markdown_code(text: str) -> str:
    """Text for inside a markdown code span (no HTML there; a backtick would end it)."""
    return terminal(text).replace("`", "ˋ").replace("|", "\\|").replace("\n", " ")


def fence(text: str) -> str:
    """A markdown code fence longer than any run of backticks in `text`."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def xml(text: str) -> str:
    """`text` without the characters XML 1.0 forbids (the writer escapes the rest)."""
    return _NOT_XML.sub("", text)


def plot(text: str) -> str:
    """A matplotlib label: printable, on one line, no `$` read as mathematics, nothing SVG's
    XML cannot carry."""
    return xml(terminal(text)).replace("$", r"\$").replace("\n", " ")


def html(text: str) -> str:
    """Text or an attribute value in HTML."""
    return _html.escape(xml(terminal(text)), quote=True)
