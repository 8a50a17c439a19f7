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
from gradscope.options import COMMANDS, SPECS, Request, from_values

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

MAX_CHECKS = 1000
# key → (accepted TOML types, description): every option of `Options` (a top-level key is a
# default for all checks), and per check also its name, target and command.
FIELDS: dict[str, tuple[tuple[type, ...], str]] = {
    name: (spec.toml, spec.expects) for name, spec in SPECS.items()}
CHECK_FIELDS: dict[str, tuple[tuple[type, ...], str]] = {
    **FIELDS,
    "name": ((str,), "text"),
    "target": ((str,), "an expression or file.py:NAME / package.module:NAME"),
    "command": ((str,), ", ".join(COMMANDS)),
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
    command = merged.pop("command", "check")
    if command not in COMMANDS:
        raise UsageError(f"{label}: `command` must be one of {', '.join(COMMANDS)}, got "
                         f"{command!r}")
    try:
        options = from_values({k: v for k, v in merged.items() if k in SPECS},
                              where=lambda key: key)
        request = Request(command, merged["target"], options, base=base)
        _precheck(request, base)
    except UsageError as exc:
        raise UsageError(f"{label}: {exc}") from None
    return CheckSpec(entry.get("name") or entry["target"], request)


def _precheck(request: Request, base: Path) -> None:
    """Cheap validation that needs no torch work: the target parses or its file exists, the
    options are in range, the VALUE strings read."""
    from gradscope.expr.parse import parse
    from gradscope.inputs.text import parse_value
    from gradscope.option_text import parse_literal
    from gradscope.targets.python import is_python_target

    options = request.options
    for key in ("arg", "init"):
        for name, value in getattr(options, key).items():
            if not isinstance(value, str):  # a string argument is passed as the string itself
                parse_literal(repr(value), f"{key}.{name}")
    target = request.target.strip()
    if is_python_target(target):
        head = target.rpartition(":")[0]
        if head.endswith(".py") and not (base / head).is_file() and not Path(head).is_file():
            raise UsageError(f"`target`: no such file {head} (relative to {base})")
    else:
        parse(target)
    for name, value in options.at.items():
        if isinstance(value, str):
            parse_value(value, f"at.{name}")
    if isinstance(options.grad, str):
        parse_value(options.grad, "grad")
