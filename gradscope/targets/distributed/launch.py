"""The ranks of a distributed check, started and ended by the coordinator (gradscope's own
process): N processes of this Python (`python -c`: channel.py says why not multiprocessing),
each on a channel of its own, a free port on 127.0.0.1 chosen for their rendezvous. Every
command goes to every rank and every rank's reply is awaited with a deadline; a rank that
raises, dies or hangs ends the check on all of them (exit 3 naming the rank and its error),
and the others are stopped and reaped — no process outlives the check."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from contextlib import closing, suppress
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

from gradscope.errors import TargetError, UsageError
from gradscope.process import shielded
from gradscope.targets.distributed.channel import Channel, NotAMessage, get, put
from gradscope.targets.distributed.rank import LOOPBACK, Described, RankSpec

MOST_RANKS = 16  # a check's ranks share one machine's cores
START_SECONDS = 120.0  # importing torch and the target, and the rendezvous, per rank
GRACE = 5.0  # seconds a stopped rank gets before it is killed
# (the parent's pid first: a rank dies with its coordinator, before it even imports torch)
ENTRY = ("import gradscope.process as p, sys; p.die_with_parent(int(sys.argv[4])); "
         "from gradscope.targets.distributed.rank import main; main()")
PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])  # where `import gradscope` finds us


INSIDE = "GRADSCOPE_RANK_OF"  # set in each rank: the coordinator's pid


def free_port() -> int:
    """A port nobody listens on now, on the loopback address."""
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


class Ranks:
    """N running ranks and their channels."""

    def __init__(self, spec: RankSpec) -> None:
        if not 1 <= spec.world <= MOST_RANKS:
            raise UsageError(f"--nproc {spec.world}: give a number of processes from 1 to "
                             f"{MOST_RANKS}")
        self.spec = spec
        self.pipes: list[Channel] = []
        self.processes: list[subprocess.Popen] = []
        try:
            for rank in range(spec.world):
                self._start(rank)
            for pipe in self.pipes:
                put(pipe, spec)
            # (a --timeout or Ctrl-C while the ranks start up ends them too: on a loaded
            # machine that is where a short limit lands, and ranks left behind waited forever)
            self.described: list[Described] = self._replies(START_SECONDS, "ready")
        except BaseException:
            self.stop()
            raise

    def _start(self, rank: int) -> None:
        """One rank's process, its channel's far ends passed to it and closed here."""
        to_rank, from_us = os.pipe()
        to_us, from_rank = os.pipe()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (PACKAGE_ROOT, os.environ.get("PYTHONPATH", "")) if p),
            INSIDE: str(os.getpid())}
        self.pipes.append(Channel(to_us, from_us))  # (closed by stop() whatever happens)
        try:
            # (each rank leads a process group of its own: what it forks is ended with it;
            # shielded: a stop between the fork and the record would leave the rank running)
            with shielded():
                process = subprocess.Popen(
                    [sys.executable, "-c", ENTRY, str(rank), str(to_rank), str(from_rank),
                     str(os.getpid())],
                    pass_fds=(to_rank, from_rank), stdin=subprocess.DEVNULL, env=env,
                    start_new_session=True)
                self.processes.append(process)
        finally:
            os.close(to_rank)
            os.close(from_rank)

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
            # (a rank that dies closes its end: its channel turns readable, and reading it
            # says so)
            ready = wait([self.pipes[r] for r in waiting], timeout=min(left, 1.0))
            for rank in sorted(waiting):
                if self.pipes[rank] in ready:
                    replies[rank] = self._reply(rank, expected, deadline)
                    waiting.discard(rank)
        return replies

    def _reply(self, rank: int, expected: str, deadline: float) -> Any:
        try:
            kind, payload = get(self.pipes[rank], deadline)
        except NotAMessage as exc:  # (an EOFError: before it)
            self._failed(rank, f"rank {rank} wrote into its channel to gradscope ({exc}): "
                               "the target's own code writes to a descriptor it inherited")
        except TimeoutError as exc:
            self._failed(rank, f"rank {rank} stalled in the middle of a reply ({exc})")
        except (EOFError, OSError):
            process = self.processes[rank]
            with suppress(subprocess.TimeoutExpired):
                process.wait(GRACE)
            self._failed(rank, f"rank {rank} died without a reply (exit code "
                               f"{process.returncode})")
        except (ValueError, TypeError) as exc:  # (a reply of another shape than (kind, payload))
            self._failed(rank, f"rank {rank} sent no reply of gradscope's ({exc})")
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
        with shielded():  # (a --timeout or Ctrl-C during the grace period: after it)
            for pipe in self.pipes:
                with suppress(OSError, EOFError, ValueError):  # (a rank already gone)
                    put(pipe, ("stop",))
            deadline = time.monotonic() + GRACE
            for process in self.processes:
                with suppress(subprocess.TimeoutExpired):
                    process.wait(max(0.0, deadline - time.monotonic()))
            for process in self.processes:
                if process.poll() is None:
                    process.kill()
                    process.wait()
                with suppress(OSError):  # what the rank forked and left in its group
                    os.killpg(process.pid, signal.SIGKILL)
            for pipe in self.pipes:
                pipe.close()
            self.pipes, self.processes = [], []
