"""The `gradscope` console script: signals first, then the CLI. Kept apart from `cli/` so that
a Ctrl-C while the CLI is still being imported ends quietly (exit 130), not in a traceback,
and SIGTERM unwinds like an exception (a report being written loses its temporary file)."""

from __future__ import annotations

import os
import signal
import sys


def _terminate(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def entry() -> None:
    signal.signal(signal.SIGTERM, _terminate)
    try:
        from gradscope.cli.main import entry as run
    except KeyboardInterrupt:
        sys.stderr.write("gradscope: aborted\n")
        os._exit(130)
    run()
