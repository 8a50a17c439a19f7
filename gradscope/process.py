"""The process's exit status belongs to gradscope, never to the user's code it runs.

Installed by the `gradscope` command and by each worker of `gradscope run` (a library import
changes nothing): `os._exit` is replaced, for the whole process, by a guard that

* in a process the user's code forked (multiprocessing's children, a bare `os.fork()`) exits
  as asked — that process is the user's;
* once gradscope has decided its exit status (the report is written), exits with that status,
  whoever asks (an `atexit.register(os._exit, 0)` of the target's cannot turn a failure into 0);
* before that, raises `Left` where it was called: the user's code leaving is its failure (exit
  3 with its frames), like `sys.exit`, never the end of gradscope with the user's code.

A child of a user's `os.fork()` that returns into gradscope's frames (rather than exiting) is
ended there (`back_from_user`) — it would otherwise run the rest of the check a second time,
fork again, and write a second report to the same stdout.

Cheap to import (no torch): `_launch` imports it before anything else.
"""

from __future__ import annotations

import os
import posix
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_real_exit = os._exit
_real_signal = signal.signal
_owner: int | None = None
_decided: int | None = None
_held: set[int] = set()  # signals whose handler is gradscope's (SIGTERM, SIGINT, SIGALRM)
_asked: dict[int, Any] = {}  # what the user's code asked for them instead (never installed)
_shield = 0  # depth of `shielded()` stretches
_pending: list[Any] = []  # the stops that arrived inside one: raised as it ends


class Left(SystemExit):
    """The user's code called `os._exit(code)` in gradscope's own process."""


def install() -> None:
    """Guard this process's exit status (idempotent)."""
    global _owner
    if _owner is not None:
        return
    _owner = os.getpid()
    os._exit = posix._exit = _guarded_exit  # type: ignore[assignment]
    signal.signal = _guarded_signal  # type: ignore[assignment]


@contextmanager
def guarded() -> Iterator[None]:
    """The guard for a stretch of code in a process that did not install it for good (the CLI's
    `main()` called in-process, by a test say): removed again afterwards."""
    if _owner is not None:
        yield
        return
    install()
    try:
        yield
    finally:
        uninstall()


def uninstall() -> None:
    global _owner
    _owner = None
    os._exit = posix._exit = _real_exit  # type: ignore[assignment]
    signal.signal = _real_signal  # type: ignore[assignment]
    _held.clear()
    _asked.clear()


def handle(signum: int, handler: Any) -> Any:
    """gradscope's own handler for a signal: it stays, whatever the user's code installs (a
    target that ignores SIGTERM cannot keep gradscope running)."""
    if _owner is not None and os.getpid() == _owner:
        _held.add(signum)
    return _real_signal(signum, handler)


def _guarded_signal(signum: int, handler: Any) -> Any:
    """signal.signal as the user's code sees it: a signal gradscope handles keeps gradscope's
    handler (the user's is remembered and reported back as the previous one); others, and any
    in a process the user's code forked, are installed as asked."""
    if _owner is None or os.getpid() != _owner or signum not in _held:
        return _real_signal(signum, handler)
    previous = _asked.get(signum, signal.getsignal(signum))
    _asked[signum] = handler
    return previous


def interrupt(stop: Any) -> None:
    """Call gradscope's stop `stop()` (it raises; from a signal handler) — at once, or where a
    `shielded()` stretch ends."""
    if _shield:
        _pending.append(stop)
        return
    stop()


@contextmanager
def shielded() -> Iterator[None]:
    """A stretch a stop must not cut in two (a child process started but not yet recorded,
    so never ended): a --timeout, SIGTERM or Ctrl-C that arrives inside is raised as it ends."""
    global _shield
    _shield += 1
    try:
        yield
    finally:
        _shield -= 1
        if not _shield and _pending:
            stop = _pending[0]
            _pending.clear()
            stop()


def _guarded_exit(code: int = 0) -> None:
    if _owner is None or os.getpid() != _owner:
        _real_exit(code)
    if _decided is not None:
        _real_exit(_decided)
    raise Left(code)


def decide(code: int) -> None:
    """gradscope's exit status is settled: every later exit, by anyone, leaves with it."""
    global _decided
    _decided = code


def decided() -> int | None:
    return _decided


def leave(code: int) -> None:
    """End the process at once with `code` (gradscope's own quick exit)."""
    _real_exit(code)


def back_from_user() -> None:
    """Called where the user's code returns to gradscope: a process the user's code forked
    does not go on running gradscope."""
    if _owner is not None and os.getpid() != _owner:
        _real_exit(0)


# Python frames a check may stack: an expression nests up to 200 levels (expr/parse.py) and a
# level costs up to ~25 frames in the deepest walker (the parser's call binding: 6; sympy's
# derivative of a nested call: more), so Python's default limit of 1,000 is met near 160 levels
DEEP_FRAMES = 8000


@contextmanager
def deep() -> Iterator[None]:
    """Python's recursion limit at least DEEP_FRAMES while inside (never lowered), restored
    after: every expression the documented limits accept is walked without a RecursionError
    (a pure-Python frame costs the C stack nothing on CPython 3.11+)."""
    before = sys.getrecursionlimit()
    if before < DEEP_FRAMES:
        sys.setrecursionlimit(DEEP_FRAMES)
    try:
        yield
    finally:
        if before < DEEP_FRAMES and sys.getrecursionlimit() == DEEP_FRAMES:
            sys.setrecursionlimit(before)


# a CPU budget is also a wall-clock one of this many times its seconds: on a loaded machine
# CPU time runs slower than the clock, and a budget must bound the wait a user sees
WALL_FACTOR = 2.0


@contextmanager
def cpu_budget(seconds: float, raise_: Any) -> Iterator[None]:
    """Call `raise_()` (which raises) where the code is once this process has spent
    `seconds` of CPU time in it (SIGVTALRM: separate from --timeout's SIGALRM), or once
    WALL_FACTOR × `seconds` have passed on the clock (a watchdog thread sends the main thread
    the same signal), so that one long pure-Python call (a sympy derivative) is stopped on
    time, not after it returns, however loaded the machine. Main thread only; elsewhere
    nothing is armed."""
    with _timer(signal.ITIMER_VIRTUAL, signal.SIGVTALRM, seconds, raise_):
        watchdog = None
        if seconds and threading.current_thread() is threading.main_thread():
            watchdog = threading.Timer(WALL_FACTOR * seconds, signal.pthread_kill,
                                       (threading.main_thread().ident, signal.SIGVTALRM))
            watchdog.daemon = True
            watchdog.start()
        try:
            yield
        finally:
            if watchdog is not None:  # (joined while the handler is still ours: a signal
                watchdog.cancel()  # sent as it was cancelled is handled, never the default's)
                watchdog.join()


@contextmanager
def deadline(seconds: float | None) -> Iterator[None]:
    """Raise errors.TimedOut where the code is after `seconds` (main thread only; None: no
    limit). The stop unwinds like a signal: nothing half-written is left behind."""
    from gradscope.errors import TimedOut

    def stop() -> None:
        raise TimedOut(seconds or 0.0)

    # (its handler is held: the target's code cannot replace it while it runs)
    with _timer(signal.ITIMER_REAL, signal.SIGALRM, seconds, stop, held=True):
        yield


@contextmanager
def _timer(which: int, signum: int, seconds: float | None, raise_: Any,
           held: bool = False) -> Iterator[None]:
    """`raise_()` where the code is once timer `which` has run `seconds` (its signal
    `signum`), then the previous handler back. Main thread only (signals reach no other);
    no seconds: nothing armed."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: object) -> None:
        interrupt(raise_)

    previous = (handle if held else _real_signal)(signum, expire)
    signal.setitimer(which, seconds)
    try:
        yield
    finally:
        signal.setitimer(which, 0)
        _real_signal(signum, previous)
        _held.discard(signum)


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent(parent: int) -> None:
    """This process is killed (SIGKILL) when its parent ends — a rank whose launcher was
    killed by `gradscope run`'s timeout would otherwise wait on forever. Linux only (elsewhere
    a rank's peers closing their connections ends it where it waits on them); a parent
    already gone ends this process at once."""
    if sys.platform.startswith("linux"):
        import contextlib
        import ctypes

        with contextlib.suppress(OSError, AttributeError):  # no prctl: the channel ends it
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))
    if os.getppid() != parent:
        os._exit(1)


_PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


def subreaper() -> None:
    """This process adopts its descendants orphaned below it (a rank's child that started a
    session of its own, whose parent ended): they stay in reach. Linux only."""
    if sys.platform.startswith("linux"):
        import contextlib
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1)


def tagged(key: str, value: str, argv: str | None = None) -> list[int]:
    """Every process (but this one) whose environment has `key=value`, or whose arguments
    include `argv`: what a launch started, and all that inherited its environment — whatever
    session, group or parent each has now (a process that forked, started its own session, or
    was orphaned keeps the variable)."""
    wanted = f"{key}={value}".encode()
    mark = argv.encode() if argv else None
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                environ = handle.read()
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                arguments = handle.read()
        except OSError:  # gone, or another user's
            continue
        if wanted in environ.split(b"\0") or (mark is not None
                                                and mark in arguments.split(b"\0")):
            found.append(int(entry))
    return found


def end_tagged(key: str, value: str, rounds: int = 5, argv: str | None = None) -> None:
    """Every process tagged `key=value` (or with `argv` among its arguments) killed (SIGKILL,
    with its process group where it leads one) and, where it is this process's child, reaped;
    again until none is left (a process may fork while it is being ended)."""
    import time

    for _ in range(rounds):
        found = tagged(key, value, argv)
        if not found:
            return
        for pid in found:
            for kill in (os.kill, os.killpg):
                try:
                    if kill is os.killpg and os.getpgid(pid) != pid:
                        continue
                    kill(pid, signal.SIGKILL)
                except (OSError, ProcessLookupError):
                    pass
        _reap(found)
        time.sleep(0.05)


def _reap(pids: list[int]) -> None:
    import contextlib

    for pid in pids:
        # (not ours to reap: its own parent, or init, does)
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)
