"""Report → one JSON document: `dataclasses.asdict` plus number encoding (non-finite →
strings). Arrays of numbers longer than a few elements are written on one line each (indented,
`--full` over millions of elements would put every number on a line of its own: ten times the
text and the memory of the check itself)."""

from __future__ import annotations

import json
import math
import re
import uuid
from typing import Any

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


def _text(value: Any) -> str:
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_text(v) for v in value) + "]"
    if isinstance(value, float):
        number = _number(value)
        return f'"{number}"' if isinstance(number, str) else float.__repr__(value)
    return str(value)


def dumps(report: Any, indent: int | None = 2) -> str:
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
    if not arrays:
        return text
    return re.sub(f'"{token}:(\\d+)"', lambda m: _text(arrays[int(m.group(1))]), text)
