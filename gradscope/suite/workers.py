"""Checks of `gradscope run` in worker processes: user code that exits, crashes, hangs or eats
memory fails its own check (outcome `error`, exit 3) and the others still run.

Each worker is a fresh `python -m gradscope.suite.workers` process (never a re-run of the
caller's `__main__`, as multiprocessing's spawn would do) that imports torch once and runs
checks one after another, answering over its stdin/stdout with pickled messages; a worker that
dies or passes a check's timeout is killed and replaced. The user's own writes to fd 1 go
nowhere (the parent's stdout may be a JSON document): the runner captures their prints per
check into the report.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import wait
from pathlib import Path
from typing import IO, Any

from gradscope.errors import UsageError
from gradscope.process import install, leave
from gradscope.suite.config import MIN_MEMORY_MB
from gradscope.suite.results import CheckResult, run_one

DEFAULT_TIMEOUT = 900.0  # seconds a check may take in a worker (a generous CI default)
VALIDATE_SECONDS = 600.0  # seconds a worker may take to start and validate the config

POLL = 0.2  # seconds between looks at the clock while waiting
# a message is framed by a mark of gradscope's and its length: the worker's channel is a
# descriptor the user's code inherits and may write into, and what it wrote is never read as
# a message (nor its length believed past MAX_MESSAGE)
_MARK = b"gradscope-msg\x00"
_HEADER = struct.Struct("!Q")
MAX_MESSAGE = 1 << 31  # bytes: a report of any check the limits allow is far smaller


class Garbled(EOFError):
    """What came over a worker's channel is no message of gradscope's (the user's code wrote
    into it): the worker is lost like one that died."""


def send(stream: IO[bytes], message: Any) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_MARK + _HEADER.pack(len(data)) + data)
    stream.flush()


def receive(stream: IO[bytes], deadline: float | None = None) -> Any:
    """The next message; EOFError when the other side is gone, Garbled when what came is no
    message of gradscope's, TimeoutError where it is not whole by `deadline` (monotonic
    seconds; None: no limit) — a writer that sent part of one and stalled never holds the
    reader past it."""
    read = (lambda n: stream.read(n)) if deadline is None else \
        (lambda n: _read_by(stream, n, deadline))
    mark = read(len(_MARK))
    if len(mark) < len(_MARK):
        raise EOFError
    if mark != _MARK:
        raise Garbled
    header = read(_HEADER.size)
    if len(header) < _HEADER.size:
        raise EOFError
    size = _HEADER.unpack(header)[0]
    if size > MAX_MESSAGE:
        raise Garbled
    data = read(size)
    if len(data) < size:
        raise EOFError
    try:
        return pickle.loads(data)
    except Exception as exc:  # (the mark itself written by the user's code, and junk after)
        raise Garbled from exc


def _read_by(stream: IO[bytes], n: int, deadline: float) -> bytes:
    """`n` bytes of a pipe (fewer at its end), read as they come until `deadline`. The
    stream's own buffer is never used: the pipe is read through its descriptor alone."""
    fd, got = stream.fileno(), bytearray()
    while len(got) < n:
        left = deadline - time.monotonic()
        if left <= 0 or not wait([fd], timeout=min(left, POLL * 5)):
            if time.monotonic() >= deadline:
                raise TimeoutError
            continue
        chunk = os.read(fd, min(n - len(got), 1 << 20))
        if not chunk:
            break
        got += chunk
    return bytes(got)


@dataclass
class Validate:
    """Ask a worker for `config.deep_errors` of these checks (the parent imports no torch)."""

    specs: list[Any]


@dataclass
class Job:
    index: int
    spec: Any  # suite.config.CheckSpec
    timeout: float


def serve(threads: int, memory_mb: int | None) -> None:
    """A worker's life: set its limits once, then run each check it is sent."""
    install()
    results = os.fdopen(os.dup(1), "wb")  # the channel back to the parent...
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # ...and nothing the user's code writes to fd 1 reaches it
    jobs = os.fdopen(os.dup(0), "rb")  # the jobs, and nothing the user's code reads from
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)  # fd 0 takes one away
    if memory_mb:
        import resource

        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    import torch

    torch.set_num_threads(threads)
    _warm_up()
    while True:
        try:
            job = receive(jobs)
        except EOFError:
            job = None
        if job is None:
            results.flush()
            leave(0)  # nothing left to flush: skip the interpreter's teardown (~0.5 s)
        if isinstance(job, Validate):
            from gradscope.suite.config import deep_errors

            send(results, deep_errors(job.specs))
            continue
        send(results, (job.index, run_one(job.spec)))


def _warm_up() -> None:
    """Imports, sympy's first derivative and torch's first kernels (~1 s), paid while the
    parent reads the config rather than by a worker's first check."""
    from gradscope.api import run
    from gradscope.options import Options, Request

    with contextlib.suppress(Exception):  # a warm-up only: the checks report real problems
        run(Request("check", "sum(sin(x) * y) + softmax(x)", Options(shape={"*": (3,)})))


@dataclass
class _Worker:
    process: subprocess.Popen | None  # None: it died, and is started again when needed
    job: Job | None = None
    started: float = 0.0

    @property
    def conn(self) -> IO[bytes]:
        return self.process.stdout  # type: ignore[return-value]


class Pool:
    """`jobs` workers, each with `threads` torch threads (and an optional memory limit)."""

    def __init__(self, jobs: int, memory_mb: int | None = None) -> None:
        self.jobs = max(1, jobs)
        self.threads = max(1, (os.cpu_count() or 1) // self.jobs)
        self.memory_mb = memory_mb
        self.workers: list[_Worker] = []

    def _start(self) -> _Worker:
        command = [sys.executable, "-m", "gradscope.suite.workers", str(self.threads),
                   str(self.memory_mb or 0)]
        # the worker imports this very gradscope, whatever the caller did to sys.path
        home = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (home, os.environ.get("PYTHONPATH", "")) if p)}
        return _Worker(subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, env=env))

    def warm(self) -> Pool:
        """Start the workers now: they import torch while the caller reads the config."""
        while len(self.workers) < self.jobs:
            self.workers.append(self._start())
        return self

    def validate(self, specs: list[Any]) -> list[str]:
        """The deep validation of `specs`, done by a worker (which has torch loaded anyway)."""
        if not self.workers:
            self.workers.append(self._start())
        worker = self.workers[0]
        try:
            send(worker.process.stdin, Validate(specs))
            return receive(worker.conn, time.monotonic() + VALIDATE_SECONDS)
        except (EOFError, OSError):
            self.close()
            self.workers = []
            limit = (f" under a memory limit of {self.memory_mb} MB (a worker needs about "
                     f"{MIN_MEMORY_MB} MB of address space for python and torch before any "
                     "check; raise --memory-limit)") if self.memory_mb else ""
            raise WorkerError(f"gradscope's worker process could not start{limit}; "
                              f"{_ended(worker.process)}") from None

    def run(self, jobs: list[Job]) -> Iterator[tuple[int, CheckResult]]:
        """Results as they finish (any order)."""
        todo = list(jobs)
        while len(self.workers) < min(self.jobs, len(todo)):
            self.workers.append(self._start())
        try:
            while todo or any(w.job for w in self.workers):
                for worker in self.workers:
                    if worker.job is None and todo:
                        if worker.process is None:
                            worker.process = self._start().process
                        worker.job, worker.started = todo.pop(0), time.monotonic()
                        # a worker that died while idle: the next look reports it
                        with contextlib.suppress(OSError):
                            send(worker.process.stdin, worker.job)
                yield from self._collect()
        except BaseException:  # stopped (a signal, a timeout): the workers go at once
            self.close(grace=0.0)
            raise
        self.close()

    def _collect(self) -> Iterator[tuple[int, CheckResult]]:
        busy = {w.conn: w for w in self.workers if w.job is not None}
        for conn in wait(list(busy), timeout=POLL):
            worker = busy[conn]
            try:
                index, result = receive(conn, worker.started + worker.job.timeout)
            except Garbled:  # (before EOFError: a subclass)
                yield worker.job.index, self._failed(worker, GARBLED)
                continue
            except TimeoutError:  # (part of a message, then nothing: the timeout below)
                continue
            except (EOFError, OSError):  # the process died mid-check
                yield worker.job.index, self._failed(worker, _death(worker.process))
                continue
            except Exception:  # (a message of the wrong shape: garbled too)
                yield worker.job.index, self._failed(worker, GARBLED)
                continue
            worker.job = None
            yield index, result
        now = time.monotonic()
        for worker in self.workers:
            if worker.job is not None and now - worker.started > worker.job.timeout:
                yield worker.job.index, self._failed(
                    worker, f"the check did not finish within its timeout of "
                            f"{worker.job.timeout:g} s (set `timeout` in the config or "
                            "--timeout); its worker process was stopped")

    def _failed(self, worker: _Worker, reason: str) -> CheckResult:
        """The check that killed or hung `worker` fails; a fresh worker takes its place when
        there is a next check for it."""
        job = worker.job
        assert job is not None and worker.process is not None
        _stop(worker.process)
        worker.process, worker.job = None, None
        spec = job.spec
        return CheckResult(spec.name, str(spec.request.target), spec.request.command, "error",
                           time.monotonic() - worker.started, error=reason, crashed=True)

    def close(self, grace: float = 1.0) -> None:
        """Tell every worker to leave, then wait for all of them together (`grace` seconds at
        most); the ones still there are killed, and all are reaped."""
        alive = [w.process for w in self.workers if w.process is not None]
        for process in alive:
            if process.poll() is None:
                with contextlib.suppress(OSError):  # a worker that just died
                    send(process.stdin, None)
        deadline = time.monotonic() + grace
        for process in alive:
            _stop(process, grace=max(0.0, deadline - time.monotonic()))
        self.workers = []


def _stop(process: subprocess.Popen, grace: float = 0.0) -> None:
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(grace)
    if process.poll() is None:
        process.kill()
        process.wait(5)
    for stream in (process.stdin, process.stdout):
        with contextlib.suppress(OSError):
            stream.close()


GARBLED = ("the target's own code wrote into the channel between its worker process and "
           "gradscope (a descriptor the code inherited); the check could not finish, and its "
           "worker was replaced")


class WorkerError(UsageError):
    """A worker could not even start (before any user code ran): the machine or the limits
    given, exit 2 — never the target's doing."""


def _ended(process: subprocess.Popen) -> str:
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(5)
    return f"it ended with exit code {process.returncode}"


def _death(process: subprocess.Popen) -> str:
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(5)
    code = process.returncode
    if code is not None and code < 0:
        name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ \
            else str(-code)
        return (f"the target's own code crashed its worker process ({name}); the check could "
                "not finish")
    return (f"the target's own code ended its worker process (exit code {code}, e.g. "
            "os._exit or a fatal error); the check could not finish")


def in_order(results: Iterator[tuple[int, CheckResult]], count: int,
             on_result: Callable[[CheckResult], None] | None,
             stop: Callable[[CheckResult], bool] | None = None) -> list[CheckResult]:
    """Results in config order, each passed to `on_result` as soon as all before it are in;
    up to the first that `stop` holds for (then `results` is closed: its workers stop)."""
    done: dict[int, CheckResult] = {}
    out: list[CheckResult] = []
    for index, result in results:
        done[index] = result
        while len(out) in done:
            out.append(done.pop(len(out)))
            if on_result is not None:
                on_result(out[-1])
            if stop is not None and stop(out[-1]):
                close = getattr(results, "close", None)
                if close is not None:
                    close()
                return out
    assert len(out) == count
    return out


if __name__ == "__main__":
    # run as `python -m`: use the module's own classes, the ones the parent's pickles name
    from gradscope.suite import workers

    workers.serve(int(sys.argv[1]), int(sys.argv[2]) or None)
