"""GitHub Actions conventions for `gradscope run`: an `::error` annotation per check that did
not pass, at the line at fault — the culprit's `def backward` where the report names one in
the target's file, else the line that defines the check (the target's `def`/`class` in a
Python file, else its entry in the config) — and the markdown summary appended to
$GITHUB_STEP_SUMMARY. Reads files as text only: no user code runs here."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from gradscope import escape
from gradscope.report.headline import headline


def active() -> bool:
    return os.environ.get("GITHUB_ACTIONS") == "true"


def annotations(suite: Any, config: Path) -> list[str]:
    """`::error file=…,line=…,title=…::message` for every check that did not pass."""
    lines = []
    for result in suite.results:
        if result.outcome == "passed":
            continue
        where, line = locate(result, config)
        message = (headline(result.report) if result.report is not None else "") or (
            result.error or result.outcome)
        title = f"gradscope check {result.name}: {result.outcome}"
        lines.append(f"::error file={_prop(str(where))},line={line},title={_prop(title)}::"
                     f"{_data(message.strip().splitlines()[0] if message.strip() else '')}")
    return lines


def locate(result: Any, config: Path) -> tuple[Path, int]:
    """The file and line that define a check: its Python target's `def`/`class NAME`, else
    the line of its name or target in the config."""
    head, _, name = result.target.rpartition(":")
    if head.endswith(".py"):
        source = Path(head) if Path(head).is_absolute() else config.parent / head
        line = _culprit_line(result, source.name) or _find(
            source, rf"^\s*(def|class)\s+{re.escape(name)}\b|^\s*{re.escape(name)}\s*=")
        if line:
            return _shown(source), line
    for literal in (result.name, result.target):
        line = _find(config, rf"=\s*['\"]{re.escape(literal)}['\"]")
        if line:
            return _shown(config), line
    return _shown(config), 1


def _culprit_line(result: Any, file: str) -> int | None:
    """The line of the culprit's backward (`where`: "file.py:LINE") where it is in `file`."""
    report = result.report
    for found in (report.diagnostics if report is not None else []):
        if found.kind == "culprit":
            named, _, line = (found.where or "").rpartition(":")
            if named == file and line.isdigit():
                return int(line)
    return None


def append_summary(markdown: str) -> str:
    """Append to the step summary file GitHub names (nothing when it names none); a note
    where it cannot be written (a folder, no permission): the run's outcome stays."""
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if not path:
        return ""
    try:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(markdown if markdown.endswith("\n") else markdown + "\n")
    except OSError as exc:
        return f"gradscope: note: the step summary was not written to {path} " \
               f"(GITHUB_STEP_SUMMARY): {exc.strerror or type(exc).__name__}"
    return ""


def _find(path: Path, pattern: str) -> int | None:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    for number, line in enumerate(text.splitlines(), 1):
        if re.search(pattern, line):
            return number
    return None


def _shown(path: Path) -> Path:
    """`path` as GitHub places an annotation: relative to the workspace (GITHUB_WORKSPACE,
    else the repository holding the working directory, else the working directory), from
    wherever gradscope runs — `../model.py` from a sub-folder lands on no file."""
    base = root()
    try:
        return path.resolve().relative_to(base)
    except ValueError:
        return path.resolve()


def root() -> Path:
    """The folder annotation paths are relative to."""
    workspace = os.environ.get("GITHUB_WORKSPACE", "").strip()
    if workspace and Path(workspace).is_dir():
        return Path(workspace).resolve()
    here = Path.cwd().resolve()
    return next((p for p in (here, *here.parents) if (p / ".git").exists()), here)


def _data(text: str) -> str:  # GitHub's escaping of a workflow command's message (control
    # characters first spelled out: a log viewer is a terminal)
    text = escape.terminal(text)
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(text: str) -> str:  # ... and of its properties
    return _data(text).replace(":", "%3A").replace(",", "%2C")
