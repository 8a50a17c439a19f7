"""Report → one JSON document: `dataclasses.asdict` plus number encoding (non-finite → strings)."""

from __future__ import annotations

import json
import math
from typing import Any


def encode(value: Any) -> Any:
    """Replace non-finite floats by "nan", "inf", "-inf" anywhere in a plain structure."""
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return value
    if isinstance(value, dict):
        return {k: encode(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [encode(v) for v in value]
    return value


def dumps(report: Any, indent: int | None = 2) -> str:
    data = report if isinstance(report, dict) else report.to_dict()
    return json.dumps(encode(data), indent=indent, allow_nan=False)
