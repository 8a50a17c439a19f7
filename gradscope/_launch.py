"""The `gradscope` console script: signals first, then the CLI. Kept apart from `cli/` so that
a Ctrl-C while the CLI is still being imported ends quietly (exit 130), not in a traceback,
and SIGTERM unwinds like an exception (a report being written loses its temporary file)."""

from __future__ import annotations

import atexit
import contextlib
import signal
import sys

from gradscope import process
from gradscope.errors import Stopped


def _terminate(signum: int, frame: object) -> None:
    def stop() -> None:
        raise Stopped(128 + signum)

    process.interrupt(stop)


def _leave_quickly() -> None:
    """Registered first, so it runs last among the atexit handlers: every handler of the
    user's code (coverage's, say) has run; what is left is the teardown of torch and sympy's
    modules (about a second), which nothing needs."""
    exit_code = process.decided()
    if exit_code is None:  # not decided by the CLI's entry: leave the normal way
        return
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    process.leave(exit_code)


def entry() -> None:
    process.install()
    atexit.register(_leave_quickly)
    process.handle(signal.SIGTERM, _terminate)
    try:
        from gradscope.cli.main import entry as run
    except KeyboardInterrupt:
        sys.stderr.write("gradscope: aborted\n")
        process.leave(130)
    # from here on Ctrl-C unwinds like SIGTERM (its own message, exit 130); before, the CLI
    # was still being imported and a KeyboardInterrupt is caught above
    process.handle(signal.SIGINT, _terminate)
    run()
