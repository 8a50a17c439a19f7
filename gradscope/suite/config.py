"""`[tool.gradscope]` → validated check specifications, before anything runs.

Every key is checked against what the CLI accepts; an unknown key, a missing target, a value of
the wrong type, an expression that does not parse or a target file that does not exist is a
UsageError naming the check and the key — found before the first check starts.
"""

from __future__ import annotations

import difflib
import functools
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gradscope.errors import UsageError
from gradscope.options import COMMANDS, Option, Request, Spec, from_values
from gradscope.suite.precheck import precheck

# megabytes of address space a worker needs before any check: python, torch and its threads
# (measured: 512 fails, 1024 starts, on a 16-core x86-64 machine)
MIN_MEMORY_MB = 1024
MAX_MEMORY_MB = 1 << 40  # (bytes past 2^63 are no limit the system can set)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

MAX_CHECKS = 1000
RUN_FIELDS: dict[str, tuple[tuple[type, ...], str]] = {
    "timeout": ((int, float), "seconds (a number > 0)"),
    "memory_limit": ((int,), "megabytes per worker process (a whole number)"),
}
PER_CHECK: dict[str, tuple[tuple[type, ...], str]] = {
    "name": ((str,), "text"),
    "target": ((str,), "an expression or file.py:NAME / package.module:NAME"),
    "command": ((str,), ", ".join(COMMANDS)),
}


def _options() -> tuple[dict[str, Spec], dict[str, Option]]:
    """Every option's spec, and the options features own (the feature registry, imported
    here: torch comes with it, and a run needs it anyway)."""
    from gradscope import features

    return features.every_spec(), features.owned_options()


def fields() -> dict[str, tuple[tuple[type, ...], str]]:
    """key → (accepted TOML types, description): every option (a top-level key is a default
    for all checks), and the run's own keys."""
    return {**{name: (spec.toml, spec.expects) for name, spec in _options()[0].items()},
            **RUN_FIELDS}


def check_fields() -> dict[str, tuple[tuple[type, ...], str]]:
    """The keys of one check: the options and its timeout (one memory limit for all workers:
    a top-level key only), its name, target and command."""
    return {**{k: v for k, v in fields().items() if k != "memory_limit"}, **PER_CHECK}


def top_fields() -> dict[str, tuple[tuple[type, ...], str]]:
    return {**fields(), "checks": ((list,), "[[tool.gradscope.checks]] tables")}


@dataclass(frozen=True)
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
    lines = ConfigLines.of(path)
    base = path.resolve().parent
    defaults, errors = _defaults(table, lines)
    checks = table.get("checks")
    if not isinstance(checks, list) or not checks:
        raise UsageError(f"{path}: no checks; add [[tool.gradscope.checks]] tables with at "
                         "least a `target`" + "".join(f"\n  {e}" for e in errors))
    if len(checks) > MAX_CHECKS:
        raise UsageError(f"{path}: {len(checks)} checks; the limit is {MAX_CHECKS}")
    specs = []
    for i, entry in enumerate(checks, 1):  # every check is validated before any runs
        spec, wrong = _spec(i, entry, defaults, base, lines)
        errors += wrong
        if spec is not None:
            specs.append(spec)
    names = [s.name for s in specs]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise UsageError(f"{path}: check names must be unique; repeated: {', '.join(dupes)}")
    return specs, path, errors


@dataclass(frozen=True)
class ConfigLines:
    """Where a config's checks and keys are, by line (read from the text: tomllib keeps no
    positions), for errors an editor can jump to."""

    text: list[str]

    @classmethod
    def of(cls, path: Path) -> ConfigLines:
        try:
            return cls(path.read_text(encoding="utf-8").splitlines())
        except (OSError, UnicodeDecodeError):
            return cls([])

    @functools.cached_property
    def headers(self) -> tuple[list[int], list[int]]:
        """The line indices of `[tool.gradscope]` and of each `[[tool.gradscope.checks]]`
        (found once: every error of a config asks for them)."""
        def found(header: str) -> list[int]:
            return [i for i, line in enumerate(self.text) if re.match(rf"\s*{header}", line)]

        return (found(r"\[\s*tool\.gradscope\s*\]"),
                found(r"\[\[\s*tool\.gradscope\.checks\s*\]\]"))

    def at(self, check: int, key: str | None = None) -> str:
        """`line N` of check #`check`'s header (0: [tool.gradscope]) or of its `key`; "" where
        it cannot be told (checks written as an inline array)."""
        starts = self.headers[1] if check else self.headers[0]
        if len(starts) < max(check, 1):
            return ""
        start = starts[check - 1] if check else starts[0]
        if key is None:
            return f"line {start + 1}"
        for i in range(start + 1, len(self.text)):
            line = self.text[i]
            if re.match(r"\s*\[", line):
                break
            if re.match(rf"\s*[\"']?{re.escape(key)}[\"']?\s*=", line):
                return f"line {i + 1}"
        return ""


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
    known = fields()
    return {k: v for k, v in table.items() if k != "checks" and k in known}, path


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
        raise UsageError(f"{path} has no [tool.gradscope] table{_misplaced(data)}")
    if not isinstance(table, dict):
        raise UsageError(f"{path}: [tool.gradscope] must be a table")
    return table


def _misplaced(data: dict[str, Any]) -> str:
    """A hint for checks written where gradscope does not look: `[[check]]`, `[[checks]]`,
    `[gradscope]` or `[tool.gradscope_checks]` at the top."""
    tool = data.get("tool") if isinstance(data.get("tool"), dict) else {}
    for key in (*data, *(f"tool.{k}" for k in tool)):
        bare = key.removeprefix("tool.")
        if bare in ("check", "checks") or bare.startswith("gradscope") or \
                difflib.get_close_matches(bare, ["gradscope"], cutoff=0.75):
            return (f"; found [{key}]: did you mean [tool.gradscope] with its checks as "
                    "[[tool.gradscope.checks]] tables?")
    return " (checks are [[tool.gradscope.checks]] tables)"


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
        raise UsageError(f"{path}: {len(errors)} errors (all of them: nothing ran):\n  "
                         + "\n  ".join(errors))


def _field_error(key: str, value: Any, fields: dict) -> str | None:
    """What is wrong with `key = value` (None: nothing): an unknown key (with the nearest
    allowed one), or a value of the wrong type."""
    if key not in fields:
        near = difflib.get_close_matches(key, list(fields), n=1, cutoff=0.6)
        if near:
            return f"unknown key `{key}`; did you mean `{near[0]}`?"
        return f"unknown key `{key}`; allowed: {', '.join(sorted(fields))}"
    types, description = fields[key]
    if (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
        return f"`{key}` must be {description}, got {value!r}"
    return None


def _key_error(key: str, value: Any, fields: dict) -> str | None:
    """What is wrong with `key = value` on its own: its name and type (`_field_error`), then
    for an option its value as the option reads it (None: nothing)."""
    wrong = _field_error(key, value, fields)
    specs, owned = _options()
    if wrong is None and key in specs:
        try:
            from_values({key: value}, where=lambda name: name, owned=owned)
        except UsageError as exc:
            wrong = str(exc)
    return wrong


def _defaults(table: dict[str, Any], lines: ConfigLines) -> tuple[dict[str, Any], list[str]]:
    """The top-level defaults that are right, and an error for each that is not (said once,
    not again in every check that would take it)."""
    defaults, errors, known = {}, [], top_fields()
    for key, value in table.items():
        if key == "checks":
            continue
        wrong = _key_error(key, value, known)
        if wrong is None:
            defaults[key] = value
        else:
            where = lines.at(0, key)
            errors.append(f"[tool.gradscope], {where}: {wrong}" if where
                          else f"[tool.gradscope]: {wrong}")
    return defaults, errors


def _spec(index: int, entry: Any, defaults: dict[str, Any], base: Path,
          lines: ConfigLines | None = None) -> tuple[CheckSpec | None, list[str]]:
    """Check #`index` and every error of it, each at its line: wrong keys and values one by
    one, then what they mean together. A check with errors still comes back (built from its
    right keys) where it has a target, so that the deeper validation of its VALUEs and
    expression reports in the same pass; it never runs, since its errors refuse the config."""
    lines = lines or ConfigLines([])
    if not isinstance(entry, dict):
        return None, [f"check #{index}: must be a table ([[tool.gradscope.checks]])"]
    label = f"check #{index}" + (f" ({entry['name']})" if isinstance(entry.get("name"), str)
                                 else "")

    def said(error: str, key: str | None = None) -> str:
        where = (lines.at(index, key) if key else "") or lines.at(index)
        return f"{label}, {where}: {error}" if where else f"{label}: {error}"

    errors, good, known = [], {}, check_fields()
    for key, value in entry.items():
        error = _key_error(key, value, known)
        if error is None:
            good[key] = value
        else:
            errors.append(said(error, key))
    if "target" not in good:
        if "target" not in entry and not any("did you mean `target`" in e for e in errors):
            errors.append(said("missing `target` (an expression or file.py:NAME)"))
        return None, errors
    merged = {**defaults, **good}
    command = merged.pop("command", "check")
    timeout, memory = merged.get("timeout"), merged.get("memory_limit")
    if command not in COMMANDS:
        errors.append(said(f"`command` must be one of {', '.join(COMMANDS)}, got {command!r}",
                           "command"))
    if timeout is not None and not 0 < timeout < float("inf"):
        errors.append(said(f"`timeout` must be a number of seconds > 0, got {timeout}",
                           "timeout"))
    if memory is not None and not MIN_MEMORY_MB <= memory <= MAX_MEMORY_MB:
        errors.append(said(f"`memory_limit` is in megabytes (at least {MIN_MEMORY_MB}: a "
                           f"worker needs that for python and torch; at most "
                           f"{MAX_MEMORY_MB}), got {memory}"))
    try:  # what the keys mean together (`at` and `shape` for one input, say)
        specs, owned = _options()
        options = from_values({k: v for k, v in merged.items() if k in specs},
                              where=lambda key: key, owned=owned)
    except UsageError as exc:
        return None, [*errors, said(str(exc))]
    request = Request(command if command in COMMANDS else "check", merged["target"], options,
                      base=base)
    where = lines.at(index)
    spec = CheckSpec(entry.get("name") or merged["target"], request, timeout, memory,
                     f"{label}, {where}" if where else label)
    return spec, errors
