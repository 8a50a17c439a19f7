"""What `gradscope run --lf` reruns: the checks of a config that did not pass last time, kept
beside the config in `.gradscope_cache/` (as pytest keeps `.pytest_cache/`; a `.gitignore`
inside keeps it out of version control). The cache is a convenience: a folder that cannot be
written, or a file that cannot be read, never changes a run's outcome.

The cache is a file anybody could have put there, so it is read only when it is a regular
file (not a FIFO, a device or a symlink) below MAX_BYTES, parsed within MAX_DEPTH levels; a
bad cache is ignored with a note. It is written only into a real folder, through a temporary
file renamed over it (never through a symlink), and the `.gitignore` is created only where
nothing, not even a dangling link, is.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

CACHE = ".gradscope_cache"
FILE = "lastfailed.json"
MAX_BYTES = 4 << 20  # names of failed checks: a few kB; far more is not ours
MAX_DEPTH = 4  # {config: [names]} is two levels deep


class _Bad(ValueError):
    """The cache is not one gradscope wrote."""


def _file(config: Path) -> Path:
    return config.resolve().parent / CACHE / FILE


def failed(config: Path) -> tuple[set[str] | None, str]:
    """The names of the checks that did not pass in the last run of `config` (None: no run
    recorded), and a note where the cache was there but unusable."""
    path = _file(config)
    try:
        data = _read(path)
    except FileNotFoundError:
        return None, ""
    except (OSError, ValueError, RecursionError) as exc:
        return None, f"--lf: ignored {path} ({_why(exc)})"
    names = data.get(str(config.resolve())) if isinstance(data, dict) else None
    if isinstance(names, list) and all(isinstance(n, str) for n in names):
        return set(names), ""
    return None, ""


def _why(exc: BaseException) -> str:
    if isinstance(exc, _Bad | OSError):
        return str(exc) if isinstance(exc, _Bad) else (exc.strerror or type(exc).__name__)
    return "not the JSON gradscope writes"


def _read(path: Path) -> Any:
    """The cache's JSON, from a regular file of bounded size only (a FIFO would block, a
    device or a sparse file would fill memory), opened without following a symlink."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == 40:  # ELOOP: a symlink
            raise _Bad("a symlink, not a file gradscope wrote") from None
        raise
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise _Bad("not a regular file")
        if info.st_size > MAX_BYTES:
            raise _Bad(f"{info.st_size} bytes, more than the {MAX_BYTES} a cache holds")
        text = handle.read(MAX_BYTES + 1)
    if len(text) > MAX_BYTES:
        raise _Bad(f"more than the {MAX_BYTES} bytes a cache holds")
    _shallow(text)
    return json.loads(text.decode("utf-8"))


def _shallow(text: bytes) -> None:
    """Refuse JSON nested deeper than MAX_DEPTH before parsing it (strings skipped)."""
    depth, quoted, escaped = 0, False, False
    for byte in text:
        if quoted:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # a backslash: the next byte is escaped
                escaped = True
            elif byte == 0x22:
                quoted = False
        elif byte == 0x22:
            quoted = True
        elif byte in (0x5B, 0x7B):
            depth += 1
            if depth > MAX_DEPTH:
                raise _Bad(f"nested deeper than {MAX_DEPTH} levels")
        elif byte in (0x5D, 0x7D):
            depth -= 1


def record(config: Path, results: list[Any], ran_all: bool) -> str:
    """Remember which checks did not pass. A partial run (-k, --shard, -x) updates only the
    checks it ran: the others keep what was known of them. A note where it could not."""
    path = _file(config)
    key = str(config.resolve())
    try:
        data = _read(path)
    except (OSError, ValueError, RecursionError):
        data = {}  # (none yet, or not ours: it is replaced, never written through)
    data = data if isinstance(data, dict) else {}
    known = set(data.get(key) or []) if not ran_all and isinstance(data.get(key), list) \
        else set()
    for result in results:
        (known.discard if result.outcome == "passed" else known.add)(result.name)
    data[key] = sorted(known)
    try:
        _write(path, json.dumps(data, indent=1))
    except (OSError, _Bad) as exc:
        return f"the --lf cache {path} was not updated ({_why(exc)})"
    return ""


def _write(path: Path, text: str) -> None:
    folder = path.parent
    with contextlib.suppress(FileExistsError):
        folder.mkdir()
    if not stat.S_ISDIR(os.lstat(folder).st_mode):  # a symlink or a file there: not ours
        raise _Bad("its folder is not a folder")
    ignore = folder / ".gitignore"
    if not os.path.lexists(ignore):
        with contextlib.suppress(OSError):
            fd = os.open(ignore, os.O_WRONLY | os.O_CREAT | os.O_EXCL |
                         getattr(os, "O_NOFOLLOW", 0), 0o644)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write("# written by gradscope run\n*\n")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)  # (replaces a symlink itself, never what it points to)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
