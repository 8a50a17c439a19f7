"""Report → one JSON document: `dataclasses.asdict` plus number encoding (non-finite →
strings). Arrays of numbers longer than a few elements are written on one line each (indented,
`--full` over millions of elements would put every number on a line of its own: ten times the
text and the memory of the check itself)."""

from __future__ import annotations

import io
import json
import math
import re
import uuid
from typing import Any, TextIO

INLINE = 16  # arrays of numbers at least this long are written compactly


def encode(value: Any) -> Any:
    """Replace non-finite floats by "nan", "inf", "-inf" anywhere in a plain structure."""
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, dict):
        return {k: encode(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [encode(v) for v in value]
    return value


def _number(value: float) -> Any:
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def _numeric(value: list | tuple) -> bool:
    """Numbers only, at any depth (a tensor's values as nested lists)."""
    return all(_numeric(v) if isinstance(v, list | tuple) else
               isinstance(v, int | float) and not isinstance(v, bool) for v in value)


CHUNK = 1 << 16  # numbers of an array written at a time (streamed: never one string of all)


def _chunk(values: list | tuple) -> str:
    """Numbers (at any depth) as JSON array items, in C: json's NaN and infinities become the
    strings the report uses ("nan", "inf", "-inf"), which no number's text contains."""
    text = json.dumps(values, separators=(", ", ": "), allow_nan=True)[1:-1]
    if "N" not in text and "I" not in text:
        return text
    return (text.replace("NaN", '"nan"').replace("-Infinity", '"-inf"')
            .replace("Infinity", '"inf"'))


def _write_array(value: list | tuple, out: TextIO) -> None:
    out.write("[")
    for start in range(0, len(value), CHUNK):
        if start:
            out.write(", ")
        out.write(_chunk(value[start:start + CHUNK]))
    out.write("]")


def write(report: Any, out: TextIO, indent: int | None = 2) -> None:
    """The report as one JSON document written to `out` a piece at a time: its long numeric
    arrays (every element of a tensor with --full) are never held as one string."""
    data = report if isinstance(report, dict) else report.to_dict()
    arrays: list[Any] = []
    token = uuid.uuid4().hex

    def lifted(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: lifted(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            if len(value) >= INLINE and _numeric(value):
                arrays.append(value)
                return f"{token}:{len(arrays) - 1}"
            return [lifted(v) for v in value]
        return _number(value) if isinstance(value, float) else value

    text = json.dumps(lifted(data), indent=indent, allow_nan=False)
    done = 0
    for found in re.finditer(f'"{token}:(\\d+)"', text):
        out.write(text[done:found.start()])
        _write_array(arrays[int(found.group(1))], out)
        done = found.end()
    out.write(text[done:])


def dumps(report: Any, indent: int | None = 2) -> str:
    out = io.StringIO()
    write(report, out, indent)
    return out.getvalue()
