"""Checks of `gradscope run` in worker processes: user code that exits, crashes, hangs or eats
memory fails its own check (outcome `error`, exit 3) and the others still run.

Each worker is a spawned Python process that imports torch once and runs checks one after
another, answering over a pipe; a worker that dies or passes a check's timeout is killed and
replaced. Its stdout goes nowhere (the parent's stdout may be a JSON document); what the user's
code prints is captured per check into the report.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

from gradscope.tools.results import CheckResult, run_one

DEFAULT_TIMEOUT = 900.0  # seconds a check may take in a worker (a generous CI default)
POLL = 0.2  # seconds between looks at the clock while waiting


@dataclass
class Job:
    index: int
    spec: Any  # tools.config.CheckSpec
    timeout: float


def _serve(conn: Connection, threads: int, memory_mb: int | None) -> None:
    """A worker's life: set its limits once, then run each check it is sent."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # nothing the user's code writes reaches the parent's stdout
    if memory_mb:
        import resource

        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    import torch

    torch.set_num_threads(threads)
    import gradscope.runner  # noqa: F401  (warm: the first check pays no import)

    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        if job is None:
            return
        conn.send((job.index, run_one(job.spec)))


@dataclass
class _Worker:
    process: Any
    conn: Connection
    job: Job | None = None
    started: float = 0.0


class Pool:
    """`jobs` workers, each with `threads` torch threads (and an optional memory limit)."""

    def __init__(self, jobs: int, memory_mb: int | None = None) -> None:
        self.context = multiprocessing.get_context("spawn")
        self.jobs = max(1, jobs)
        self.threads = max(1, (os.cpu_count() or 1) // self.jobs)
        self.memory_mb = memory_mb
        self.workers: list[_Worker] = []

    def _start(self) -> _Worker:
        parent, child = self.context.Pipe()
        process = self.context.Process(target=_serve, args=(child, self.threads, self.memory_mb),
                                       daemon=True)
        process.start()
        child.close()
        return _Worker(process, parent)

    def run(self, jobs: list[Job]) -> Iterator[tuple[int, CheckResult]]:
        """Results as they finish (any order)."""
        todo = list(jobs)
        self.workers = [self._start() for _ in range(min(self.jobs, len(todo)))]
        try:
            while todo or any(w.job for w in self.workers):
                for worker in self.workers:
                    if worker.job is None and todo:
                        worker.job, worker.started = todo.pop(0), time.monotonic()
                        worker.conn.send(worker.job)
                yield from self._collect()
        finally:
            self.close()

    def _collect(self) -> Iterator[tuple[int, CheckResult]]:
        busy = {w.conn: w for w in self.workers if w.job is not None}
        for conn in wait(list(busy), timeout=POLL):
            worker = busy[conn]
            try:
                index, result = conn.recv()
            except (EOFError, OSError):  # the process died mid-check
                yield worker.job.index, self._failed(worker, _death(worker.process))
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
        """The check that killed or hung `worker` fails; a fresh worker takes its place."""
        job = worker.job
        assert job is not None
        _stop(worker.process)
        fresh = self._start()
        worker.process, worker.conn, worker.job = fresh.process, fresh.conn, None
        spec = job.spec
        return CheckResult(spec.name, str(spec.request.target), spec.request.command, "error",
                           time.monotonic() - worker.started, error=reason, crashed=True)

    def close(self) -> None:
        for worker in self.workers:
            if worker.process.is_alive():
                with contextlib.suppress(OSError):  # a worker that just died
                    worker.conn.send(None)
            _stop(worker.process, grace=1.0)
        self.workers = []


def _stop(process: Any, grace: float = 0.0) -> None:
    process.join(grace)
    if process.is_alive():
        process.kill()
        process.join(5)


def _death(process: Any) -> str:
    process.join(5)
    code = process.exitcode
    if code is not None and code < 0:
        name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ \
            else str(-code)
        return (f"the target's own code crashed its worker process ({name}); the check could "
                "not finish")
    return (f"the target's own code ended its worker process (exit code {code}, e.g. "
            "os._exit or a fatal error); the check could not finish")


def in_order(results: Iterator[tuple[int, CheckResult]], count: int,
             on_result: Callable[[CheckResult], None] | None) -> list[CheckResult]:
    """Results in config order, each passed to `on_result` as soon as all before it are in."""
    done: dict[int, CheckResult] = {}
    out: list[CheckResult] = []
    for index, result in results:
        done[index] = result
        while len(out) in done:
            out.append(done.pop(len(out)))
            if on_result is not None:
                on_result(out[-1])
    assert len(out) == count
    return out
