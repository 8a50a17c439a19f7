"""The ranks of a distributed check, started and ended by the coordinator (gradscope's own
process): N processes through torch.multiprocessing's spawn context, each on a pipe of its own,
a free port on 127.0.0.1 chosen for their rendezvous. Every command goes to every rank and
every rank's reply is awaited with a deadline; a rank that raises, dies or hangs ends the check
on all of them (exit 3 naming the rank and its error), and the others are stopped and reaped —
no process outlives the check."""

from __future__ import annotations

import multiprocessing
import socket
import time
from collections.abc import Sequence
from contextlib import closing, suppress
from multiprocessing.connection import wait
from typing import Any

from gradscope.distributed.rank import LOOPBACK, Described, RankSpec, get, put, serve
from gradscope.errors import TargetError, UsageError

MOST_RANKS = 16  # a check's ranks share one machine's cores
START_SECONDS = 120.0  # importing torch and the target, and the rendezvous, per rank
GRACE = 5.0  # seconds a stopped rank gets before it is killed


def free_port() -> int:
    """A port nobody listens on now, on the loopback address."""
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


class Ranks:
    """N running ranks and their pipes."""

    def __init__(self, spec: RankSpec) -> None:
        if not 1 <= spec.world <= MOST_RANKS:
            raise UsageError(f"--nproc {spec.world}: give a number of processes from 1 to "
                             f"{MOST_RANKS}")
        context = multiprocessing.get_context("spawn")
        self.spec = spec
        self.pipes: list[Any] = []
        self.processes: list[Any] = []
        for rank in range(spec.world):
            ours, theirs = context.Pipe()
            process = context.Process(target=serve, args=(rank, spec, theirs), daemon=True,
                                      name=f"gradscope rank {rank}")
            process.start()
            theirs.close()
            self.pipes.append(ours)
            self.processes.append(process)
        self.described: list[Described] = self._replies(START_SECONDS, "ready")

    def ask(self, commands: Sequence[tuple]) -> list[Any]:
        """Send each rank its command (the same kind for all) and return the replies in rank
        order; the ranks are ended and a TargetError raised where any fails."""
        for pipe, command in zip(self.pipes, commands, strict=True):
            try:
                put(pipe, command)
            except (OSError, EOFError):
                break  # (its reply, or its death, says why)
        return self._replies(self.spec.timeout + GRACE, "ok")

    def _replies(self, seconds: float, expected: str) -> list[Any]:
        """Every rank's reply, taken as each arrives (a rank that dies wakes the wait too);
        a rank that fails, dies or outlasts `seconds` ends the check."""
        deadline = time.monotonic() + seconds
        replies: list[Any] = [None] * len(self.pipes)
        waiting = set(range(len(self.pipes)))
        while waiting:
            left = deadline - time.monotonic()
            if left <= 0:
                ranks = ", ".join(str(r) for r in sorted(waiting))
                self._failed(min(waiting), f"rank(s) {ranks} did not answer within "
                                           f"{seconds:g} s (a collective waiting for a rank "
                                           "that never joined it, or a hang)")
            handles = [self.pipes[r] for r in waiting] + \
                [self.processes[r].sentinel for r in waiting]
            ready = wait(handles, timeout=min(left, 1.0))
            for rank in sorted(waiting):
                if self.pipes[rank] in ready:
                    replies[rank] = self._reply(rank, expected)
                    waiting.discard(rank)
                elif self.processes[rank].sentinel in ready:
                    self._failed(rank, f"rank {rank} died (exit code "
                                       f"{self.processes[rank].exitcode}) without a reply")
        return replies

    def _reply(self, rank: int, expected: str) -> Any:
        try:
            kind, payload = get(self.pipes[rank])
        except (EOFError, OSError):
            self._failed(rank, f"rank {rank} ended without a reply (exit code "
                               f"{self.processes[rank].exitcode})")
        if kind != expected:
            message, code = payload
            if code == UsageError.exit_code:  # the request, not the code: said as it is
                self.stop()
                raise UsageError(message)
            self._failed(rank, f"rank {rank}: {message}")
        return payload

    def _failed(self, rank: int, message: str) -> None:
        self.stop()
        raise TargetError(f"the distributed target failed on {message}", during="forward",
                          error="rank", detail=message)

    def stop(self) -> None:
        """Every rank told to stop, given GRACE seconds, then killed; all reaped."""
        for pipe in self.pipes:
            with suppress(OSError, EOFError, ValueError):  # (a rank already gone)
                put(pipe, ("stop",))
        deadline = time.monotonic() + GRACE
        for process in self.processes:
            process.join(max(0.0, deadline - time.monotonic()))
        for process in self.processes:
            if process.is_alive():
                process.kill()
                process.join(GRACE)
        for pipe in self.pipes:
            pipe.close()
        self.pipes, self.processes = [], []
