"""The JSON Schema of `[tool.gradscope]` (`gradscope run --config-schema`), for editors that
check TOML against one (Even Better TOML, taplo, PyCharm): every key `gradscope run` reads, its
types, its allowed values and its help, from the same tables the config is validated with."""

from __future__ import annotations

from typing import Any

from gradscope.options import Spec
from gradscope.suite.config import MIN_MEMORY_MB, check_fields, fields

JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array",
              dict: "object"}


def _property(key: str, types: tuple[type, ...], description: str, specs: dict[str, Spec]
              ) -> dict[str, Any]:
    kinds = sorted({JSON_TYPES[t] for t in types if t in JSON_TYPES})
    if "integer" in kinds and "number" in kinds:
        kinds.remove("integer")  # (a number takes whole ones)
    out: dict[str, Any] = {"type": kinds[0] if len(kinds) == 1 else kinds}
    spec = specs.get(key)
    out["description"] = " ".join((spec.help if spec else description).split())
    if spec is not None and spec.choices:
        out["enum"] = list(spec.choices)
    if spec is not None and spec.minimum is not None:
        out["minimum"] = spec.minimum
    if key == "memory_limit":
        out["minimum"] = MIN_MEMORY_MB
    if key == "timeout":
        out["exclusiveMinimum"] = 0
    return out


def schema() -> dict[str, Any]:
    """The schema of a pyproject.toml's `[tool.gradscope]` (and of a TOML file given to
    `gradscope run`, whose checks sit at the same place)."""
    from gradscope import features  # (the options features own: a run's config takes them)

    specs = features.every_spec()
    check = {"type": "object", "additionalProperties": False, "required": ["target"],
             "properties": {k: _property(k, t, d, specs) for k, (t, d) in
                            check_fields().items()}}
    table = {"type": "object", "additionalProperties": False,
             "properties": {**{k: _property(k, t, d, specs) for k, (t, d) in fields().items()},
                            "checks": {"type": "array", "minItems": 1, "items": check,
                                       "description": "The checks, one "
                                                      "[[tool.gradscope.checks]] table each."}}}
    return {"$schema": "http://json-schema.org/draft-07/schema#",
            "title": "gradscope: [tool.gradscope] of pyproject.toml",
            "type": "object",
            "properties": {"tool": {"type": "object",
                                    "properties": {"gradscope": table}}}}
