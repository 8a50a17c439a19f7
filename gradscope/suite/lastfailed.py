"""What `gradscope run --lf` reruns: the checks of a config that did not pass last time, kept
beside the config in `.gradscope_cache/` (as pytest keeps `.pytest_cache/`; a `.gitignore`
inside keeps it out of version control). The cache is a convenience: a folder that cannot be
written, or a file that cannot be read, never changes a run's outcome."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

CACHE = ".gradscope_cache"
FILE = "lastfailed.json"


def _file(config: Path) -> Path:
    return config.resolve().parent / CACHE / FILE


def failed(config: Path) -> set[str] | None:
    """The names of the checks that did not pass in the last run of `config` (None: no run
    recorded)."""
    try:
        data = json.loads(_file(config).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    names = data.get(str(config.resolve())) if isinstance(data, dict) else None
    return set(names) if isinstance(names, list) and all(isinstance(n, str) for n in names) \
        else None


def record(config: Path, results: list[Any], ran_all: bool) -> None:
    """Remember which checks did not pass. A partial run (-k, --shard, -x) updates only the
    checks it ran: the others keep what was known of them."""
    path = _file(config)
    key = str(config.resolve())
    with contextlib.suppress(OSError, ValueError):
        data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        data = data if isinstance(data, dict) else {}
        known = set(data.get(key) or []) if not ran_all else set()
        for result in results:
            (known.discard if result.outcome == "passed" else known.add)(result.name)
        data[key] = sorted(known)
        path.parent.mkdir(exist_ok=True)
        ignore = path.parent / ".gitignore"
        if not ignore.exists():
            ignore.write_text("# written by gradscope run\n*\n", encoding="utf-8")
        path.write_text(json.dumps(data, indent=1), encoding="utf-8")
