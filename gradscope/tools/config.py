"""`[tool.gradscope]` → validated check specifications, before anything runs.

Every key is checked against what the CLI accepts; an unknown key, a missing target, a value of
the wrong type, an expression that does not parse or a target file that does not exist is a
UsageError naming the check and the key — found before the first check starts.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gradscope.errors import UsageError
from gradscope.inputs.bind import FAIL_ON, Request

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

MAX_CHECKS = 1000
COMMANDS = ("check", "jvp", "jacobian")
# key → (accepted Python types, description); shared by the top level (defaults) and checks.
FIELDS: dict[str, tuple[tuple[type, ...], str]] = {
    "dtype": ((str,), "float64, float32, float16 or bfloat16"),
    "fail_on": ((str,), "mismatch, warning or never"),
    "eps": ((int, float), "a number"),
    "atol": ((int, float), "a number"),
    "rtol": ((int, float), "a number"),
    "seed": ((int,), "a whole number"),
    "device": ((str,), "cpu, cuda or cuda:N"),
    "shape": ((str, list, dict), "\"2,3\", [2, 3] or a table NAME = \"2,3\""),
    "max_elements": ((int,), "a whole number"),
    "full": ((bool,), "true or false"),
    "order": ((int,), "1 or 2"),
    "max_elements_total": ((int,), "a whole number"),
    "max_fd": ((int,), "a whole number"),
    "sample": ((int,), "a whole number"),
}
CHECK_FIELDS: dict[str, tuple[tuple[type, ...], str]] = {
    **FIELDS,
    "name": ((str,), "text"),
    "target": ((str,), "an expression or file.py:NAME / package.module:NAME"),
    "command": ((str,), "check, jvp or jacobian"),
    "at": ((dict,), "a table NAME = VALUE"),
    "grad": ((str, int, float, list), "a VALUE string, number or array"),
    "tangent": ((dict, str, int, float, list), "a table NAME = VALUE (or one VALUE)"),
    "arg": ((dict,), "a table NAME = literal"),
    "init": ((dict,), "a table NAME = literal"),
    "repeat": ((int,), "a whole number"),
}


@dataclass
class CheckSpec:
    name: str
    request: Request


def load(path: Path | None) -> tuple[list[CheckSpec], Path]:
    """Read and validate a config: the given TOML file, else ./pyproject.toml."""
    path = path or Path("pyproject.toml")
    if not path.is_file():
        raise UsageError(f"no config file {path}: put [tool.gradscope] checks in pyproject.toml "
                         "or give a TOML file to `gradscope run`")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path} is not valid TOML: {exc}") from None
    table = data.get("tool", {}).get("gradscope") if isinstance(data.get("tool"), dict) else None
    if table is None:
        raise UsageError(f"{path} has no [tool.gradscope] table")
    if not isinstance(table, dict):
        raise UsageError(f"{path}: [tool.gradscope] must be a table")
    base = path.resolve().parent
    defaults = {k: v for k, v in table.items() if k != "checks"}
    for key, value in defaults.items():
        _check_field("[tool.gradscope]", key, value, FIELDS)
    checks = table.get("checks")
    if not isinstance(checks, list) or not checks:
        raise UsageError(f"{path}: no checks; add [[tool.gradscope.checks]] tables with at "
                         "least a `target`")
    if len(checks) > MAX_CHECKS:
        raise UsageError(f"{path}: {len(checks)} checks; the limit is {MAX_CHECKS}")
    specs = [_spec(i, entry, defaults, base) for i, entry in enumerate(checks, 1)]
    names = [s.name for s in specs]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise UsageError(f"{path}: check names must be unique; repeated: {', '.join(dupes)}")
    return specs, path


def _check_field(where: str, key: str, value: Any, fields: dict) -> None:
    if key not in fields:
        raise UsageError(f"{where}: unknown key `{key}`; allowed: {', '.join(sorted(fields))}")
    types, description = fields[key]
    if isinstance(value, bool) and bool not in types:
        raise UsageError(f"{where}: `{key}` must be {description}, got {value!r}")
    if not isinstance(value, types):
        raise UsageError(f"{where}: `{key}` must be {description}, got {value!r}")


def _spec(index: int, entry: Any, defaults: dict[str, Any], base: Path) -> CheckSpec:
    if not isinstance(entry, dict):
        raise UsageError(f"check #{index}: must be a table ([[tool.gradscope.checks]])")
    label = f"check #{index}" + (f" ({entry['name']})" if isinstance(entry.get("name"), str)
                                 else "")
    for key, value in entry.items():
        _check_field(label, key, value, CHECK_FIELDS)
    if "target" not in entry:
        raise UsageError(f"{label}: missing `target` (an expression or file.py:NAME)")
    merged = {**defaults, **entry}
    command = merged.get("command", "check")
    if command not in COMMANDS:
        raise UsageError(f"{label}: `command` must be one of {', '.join(COMMANDS)}, got "
                         f"{command!r}")
    if merged.get("fail_on", "mismatch") not in FAIL_ON:
        raise UsageError(f"{label}: `fail_on` must be one of {', '.join(FAIL_ON)}")
    try:
        request = _request(command, merged, base)
        _precheck(request, base)
    except UsageError as exc:
        raise UsageError(f"{label}: {exc}") from None
    return CheckSpec(entry.get("name") or entry["target"], request)


def _request(command: str, c: dict[str, Any], base: Path) -> Request:
    from gradscope.inputs.text import parse_shape
    from gradscope.targets.python import parse_literal

    shapes: dict[str, tuple[int, ...]] = {}
    default_shape = None
    shape = c.get("shape")
    if isinstance(shape, dict):
        shapes = {k: _shape(v, f"shape.{k}", parse_shape) for k, v in shape.items()}
    elif shape is not None:
        default_shape = _shape(shape, "shape", parse_shape)
    tangent = c.get("tangent")
    if tangent is not None and not isinstance(tangent, dict):
        tangent = {"*": tangent}
    for key in ("arg", "init"):
        for name, value in (c.get(key) or {}).items():
            if isinstance(value, str) and key == "arg":
                continue  # a string argument is passed as the string itself
            parse_literal(repr(value), f"{key}.{name}")
    return Request(command=command, target=c["target"], at=dict(c.get("at") or {}),
                   shapes=shapes, default_shape=default_shape, grad=c.get("grad"),
                   tangent=tangent, dtype=c.get("dtype", "float64"), eps=c.get("eps"),
                   atol=c.get("atol"), rtol=c.get("rtol"), seed=c.get("seed", 0),
                   device=c.get("device", "cpu"), fail_on=c.get("fail_on", "mismatch"),
                   max_elements=c.get("max_elements", 10_000), full=c.get("full", False),
                   args=dict(c.get("arg") or {}), init=dict(c.get("init") or {}), base=base,
                   repeat=c.get("repeat", 1), order=c.get("order", 1),
                   max_elements_total=c.get("max_elements_total", 20_000_000),
                   max_fd=c.get("max_fd", 20_000), sample=c.get("sample", 1_000))


def _shape(value: Any, what: str, parse_shape) -> tuple[int, ...]:
    if isinstance(value, list):
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise UsageError(f"`{what}` must be whole numbers")
        value = ",".join(str(v) for v in value) or "()"
    if not isinstance(value, str):
        raise UsageError(f"`{what}` must be \"2,3\" or [2, 3]")
    return parse_shape(value, what)


def _precheck(request: Request, base: Path) -> None:
    """Cheap validation that needs no torch work: the target parses or its file exists, the
    options are in range, the VALUE strings read."""
    from gradscope.expr.parse import parse
    from gradscope.inputs.bind import DTYPES, validate
    from gradscope.inputs.text import parse_value
    from gradscope.targets.python import is_python_target

    validate(request)
    if request.dtype not in DTYPES:
        raise UsageError(f"`dtype` must be one of {', '.join(DTYPES)}")
    target = request.target.strip()
    if is_python_target(target):
        head = target.rpartition(":")[0]
        if head.endswith(".py") and not (base / head).is_file() and not Path(head).is_file():
            raise UsageError(f"`target`: no such file {head} (relative to {base})")
    else:
        parse(target)
    for name, value in request.at.items():
        if isinstance(value, str):
            parse_value(value, f"at.{name}")
    if isinstance(request.grad, str):
        parse_value(request.grad, "grad")
