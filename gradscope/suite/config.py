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
from gradscope.suite.precheck import precheck

# megabytes of address space a worker needs before any check: python, torch and its threads
# (measured: 512 fails, 1024 starts, on a 16-core x86-64 machine)
MIN_MEMORY_MB = 1024

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

MAX_CHECKS = 1000
# key → (accepted TOML types, description): every option of `Options` (a top-level key is a
# default for all checks), and per check also its name, target and command.
FIELDS: dict[str, tuple[tuple[type, ...], str]] = {
    name: (spec.toml, spec.expects) for name, spec in SPECS.items()}
RUN_FIELDS: dict[str, tuple[tuple[type, ...], str]] = {
    "timeout": ((int, float), "seconds (a number > 0)"),
    "memory_limit": ((int,), "megabytes per worker process (a whole number)"),
}
FIELDS.update(RUN_FIELDS)
CHECK_FIELDS: dict[str, tuple[tuple[type, ...], str]] = {
    **FIELDS,
    "name": ((str,), "text"),
    "target": ((str,), "an expression or file.py:NAME / package.module:NAME"),
    "command": ((str,), ", ".join(COMMANDS)),
}
del CHECK_FIELDS["memory_limit"]  # one limit for all workers: a top-level key only


@dataclass
class CheckSpec:
    name: str
    request: Request
    timeout: float | None = None  # seconds in a worker (None: the run's default)
    memory_mb: int | None = None  # the run's memory limit per worker (top-level key)
    label: str = ""  # how errors name it: check #N (name)


def load(path: Path | None) -> tuple[list[CheckSpec], Path]:
    """Read and validate a whole config (the given TOML file, else ./pyproject.toml): every
    error of every check at once, as one UsageError."""
    specs, path, errors = read(path)
    refuse(path, sorted(errors + deep_errors(specs), key=check_number))
    return specs, path


def read(path: Path | None) -> tuple[list[CheckSpec], Path, list[str]]:
    """The checks whose keys and types are right, and the errors of the others. Needs no
    torch: what does (VALUEs, expressions, input names) is `deep_errors`, which `gradscope
    run` has a worker do while this process stays light."""
    path = path or nearest()
    table = _table(path)
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
    specs, errors = [], []
    for i, entry in enumerate(checks, 1):  # every check is validated before any runs
        try:
            specs.append(_spec(i, entry, defaults, base))
        except UsageError as exc:
            errors.append(str(exc))
    names = [s.name for s in specs]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise UsageError(f"{path}: check names must be unique; repeated: {', '.join(dupes)}")
    return specs, path, errors


def nearest(start: Path | None = None) -> Path:
    """The pyproject.toml that configures this folder, as ruff and pytest find theirs: the
    nearest one upward with a [tool.gradscope] table (else ./pyproject.toml, whose absence
    or emptiness the reader reports)."""
    return _nearest(start)[0]


def _nearest(start: Path | None) -> tuple[Path, Any]:
    """(the nearest config, its [tool.gradscope] value, None when there is none): each
    candidate is read and parsed once."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "pyproject.toml"
        table = _tool_table(candidate) if candidate.is_file() else None
        if table is not None:
            shown = candidate if folder != Path.cwd().resolve() else Path("pyproject.toml")
            return shown, table
    return Path("pyproject.toml"), None


def _tool_table(path: Path) -> Any:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return None
    tool = data.get("tool")
    return tool.get("gradscope") if isinstance(tool, dict) else None


def defaults_near(start: Path | None = None) -> tuple[dict[str, Any], Path]:
    """The top-level [tool.gradscope] defaults of the nearest config ({} when there is none)
    and that config: what `check`, `jvp` and `jacobian` take where the command line says
    nothing."""
    path, table = _nearest(start)
    if table is None:
        return {}, path
    if not isinstance(table, dict):
        raise UsageError(f"{path}: [tool.gradscope] must be a table")
    return {k: v for k, v in table.items() if k != "checks" and k in FIELDS}, path


def _table(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise UsageError(f"no config file {path}: put [tool.gradscope] checks in pyproject.toml "
                         "or give a TOML file to `gradscope run`")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path} is not valid TOML: {exc}") from None
    except RecursionError:  # tomllib recurses once per level of nesting
        raise UsageError(f"{path}: values are nested too deeply to read (arrays or inline "
                         "tables thousands of levels deep)") from None
    table = data.get("tool", {}).get("gradscope") if isinstance(data.get("tool"), dict) else None
    if table is None:
        raise UsageError(f"{path} has no [tool.gradscope] table")
    if not isinstance(table, dict):
        raise UsageError(f"{path}: [tool.gradscope] must be a table")
    return table


def check_number(error: str) -> int:
    """check #N's errors first by N (a config-wide error first of all)."""
    head = error.split(" ", 2)
    return int(head[1].strip("#:")) if head[0] == "check" and head[1][1:].strip(":").isdigit() \
        else 0


def deep_errors(specs: list[CheckSpec]) -> list[str]:
    """What `precheck` finds in each check (it reads VALUEs and expressions: torch)."""
    errors = []
    for spec in specs:
        try:
            precheck(spec.request, spec.request.base or Path.cwd())
        except UsageError as exc:
            errors.append(f"{spec.label}: {exc}")
    return errors


def refuse(path: Path, errors: list[str]) -> None:
    """Every error at once (one as itself), or nothing."""
    if len(errors) == 1:
        raise UsageError(errors[0])
    if errors:
        raise UsageError(f"{path}: {len(errors)} checks have errors:\n  " + "\n  ".join(errors))


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
        timeout, memory = merged.get("timeout"), merged.get("memory_limit")
        if timeout is not None and not 0 < timeout < float("inf"):
            raise UsageError(f"`timeout` must be a number of seconds > 0, got {timeout}")
        if memory is not None and memory < MIN_MEMORY_MB:
            raise UsageError(f"`memory_limit` is in megabytes (at least {MIN_MEMORY_MB}: a "
                             f"worker needs that for python and torch), got {memory}")
    except UsageError as exc:
        raise UsageError(f"{label}: {exc}") from None
    return CheckSpec(entry.get("name") or entry["target"], request, timeout, memory, label)
