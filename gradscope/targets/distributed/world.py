"""The world of ranks this process is one of, as torch's launchers make it: its place read from
the environment (place.py), the default process group joined (gloo on the CPU, nccl for
--device cuda: the *work* group, the one the user's code reduces over) and two gloo groups of
gradscope's own beside it (the *control* groups), over which rank 0 — which runs the check —
sends every other rank its commands and reads their replies.

A check is collective: every rank calls it (every process torchrun starts runs `gradscope
check`; every worker of `--nproc`'s launch runs the request it was given); rank 0 runs the
stages, each evaluation of the user's code one command to every rank, its own part run here
between sending and reading; the others serve until rank 0 tells them to stop, with the report
or the error, so that every rank ends with the verdict. A check started while one runs (a target
file calling `gradscope.check(..., nproc=2)` at import) is refused.

Messages are the bytes `torch.save` makes (tensors by value, on the CPU), framed by their size:
a reply is read within a deadline (a rank that hangs is named) and at most MAX_MESSAGE bytes."""

from __future__ import annotations

import atexit
import io
import os
import queue
import sys
import threading
import uuid
from collections.abc import Callable, Sequence
from contextlib import suppress
from datetime import timedelta
from typing import Any

import torch

from gradscope.errors import GradscopeError, TargetError, UsageError
from gradscope.targets.distributed.place import RANK_PID, TAG, Place, environment, place

# seconds a rank may take over one command (an evaluation: its forward and backward with
# their collectives) before rank 0 ends the check naming it; building the target (importing
# torch's parallel APIs and the target's file, a mesh's rendezvous) gets longer
ANSWER_SECONDS = 65.0
BUILD_SECONDS = 180.0
# seconds a serving rank waits for rank 0's next command: rank 0 may compute for long between
# two evaluations (a refinement, a fit), and a rank 0 that dies closes its connections, which
# ends the wait at once
IDLE_SECONDS = 24 * 3600.0
GRACE = 5.0  # seconds the last message (stop) may take to reach a rank


def _memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 1 << 36


# the largest message read: half the machine's memory (it is held whole to load it)
MAX_MESSAGE = _memory() // 2


class World:
    """This process's world, joined: its rank, size and control groups."""

    def __init__(self, where: Place, device: str) -> None:
        import torch.distributed as dist

        self.rank, self.size, self.local_rank = where.rank, where.size, where.local_rank
        self.launcher = where.launcher
        # (one GPU a rank: the one its local rank names, as torchrun's users pick it)
        self.device = f"cuda:{where.local_rank}" if device.startswith("cuda") else "cpu"
        self._ours = not dist.is_initialized()
        if self._ours:
            environment(where)
            backend = "nccl" if self.device != "cpu" else "gloo"
            if backend == "nccl":
                _gpu_for(where)
            from gradscope.targets.distributed import COLLECTIVE_TIMEOUT

            dist.init_process_group(backend, rank=where.rank, world_size=where.size,
                                    timeout=timedelta(seconds=COLLECTIVE_TIMEOUT))
            atexit.register(self.leave)
        # (every rank makes them in the same order: new_group is collective)
        self._commands = dist.new_group(backend="gloo", timeout=timedelta(seconds=IDLE_SECONDS))
        self._replies = dist.new_group(backend="gloo", timeout=timedelta(seconds=IDLE_SECONDS))
        self.claimed = False
        self._local = Local()

    # ------------------------------------------------------------------ rank 0's side
    def ask(self, commands: Sequence[tuple], here: Callable[[tuple], Any],
            seconds: float = ANSWER_SECONDS) -> list[Any]:
        """Every rank's reply to its command (rank order): rank 0's own run by `here`
        between sending and reading. A rank that raised, died or outlasted `seconds` ends
        the check (the first such rank named; a collective's timeout, the consequence of
        another rank's failure, is named only where nothing else failed)."""
        for rank in range(1, self.size):
            try:
                self._send(commands[rank], rank, self._commands)
            except RuntimeError as exc:
                raise _rank_failed(rank, f"rank {rank} could not be reached ({_first(exc)}): "
                                         "it died or left the check") from None
        replies: list[Any] = [None] * self.size
        try:
            replies[0] = ("ok", self._local.run(here, commands[0]))
        except GradscopeError as exc:
            replies[0] = ("error", marked(exc))
        for rank in range(1, self.size):
            replies[rank] = self._reply(rank, seconds)
        failed = [(r, e) for r, (kind, e) in enumerate(replies) if kind == "error"]
        if failed:
            raise _first_failure(failed)
        return [payload for _, payload in replies]

    def _reply(self, rank: int, seconds: float) -> tuple[str, Any]:
        try:
            return self._receive(rank, self._replies, seconds)
        except TimeoutError:
            return ("error", _rank_failed(
                rank, f"rank {rank} did not answer within {seconds:g} s (a collective waiting "
                      "for a rank that never joined it, or a hang)", hang=True))
        except (RuntimeError, EOFError) as exc:
            return ("error", _rank_failed(rank, f"rank {rank} died without a reply (its "
                                                f"connection: {_first(exc)})", hang=True))

    def stop(self, outcome: tuple[str, Any]) -> None:
        """Every other rank told the check is over, with its outcome (each gets what the
        message can reach it with within GRACE; a rank stuck in its own code is the
        launcher's to end)."""
        for rank in range(1, self.size):
            with suppress(RuntimeError, TimeoutError):
                self._send(("stop", outcome), rank, self._commands, GRACE)

    # ------------------------------------------------------------- the other ranks' side
    def serve(self, handle: Callable[[tuple], Any]) -> tuple[str, Any]:
        """Rank 0's commands answered by `handle` until it says stop; the stop's outcome."""
        while True:
            command = self._receive(0, self._commands, IDLE_SECONDS)
            if command[0] == "stop":
                return command[1]
            try:
                reply: tuple[str, Any] = ("ok", handle(command))
            except GradscopeError as exc:
                reply = ("error", marked(exc))
            self._send(reply, 0, self._replies)

    # ------------------------------------------------------------------ messages
    def _send(self, message: Any, rank: int, group: Any, seconds: float | None = None) -> None:
        import torch.distributed as dist

        buffer = io.BytesIO()
        torch.save(message, buffer)
        data = torch.frombuffer(bytearray(buffer.getvalue()), dtype=torch.uint8)
        size = torch.tensor([data.numel()], dtype=torch.int64)
        for tensor in (size, data):
            work = dist.isend(tensor, dst=rank, group=group)
            if seconds is None:
                work.wait()
            elif not work.wait(timeout=timedelta(seconds=seconds)):
                raise TimeoutError(f"a message to rank {rank} was not taken")

    def _receive(self, rank: int, group: Any, seconds: float) -> Any:
        """One message from `rank`, whole within `seconds` (TimeoutError), at most
        MAX_MESSAGE bytes (EOFError past it: not gradscope's)."""
        import torch.distributed as dist

        size = torch.zeros(1, dtype=torch.int64)
        _wait(dist.irecv(size, src=rank, group=group), seconds)
        length = int(size.item())
        if not 0 <= length <= MAX_MESSAGE:
            raise EOFError(f"a message of {length:,} bytes (at most {MAX_MESSAGE:,})")
        data = torch.empty(length, dtype=torch.uint8)
        _wait(dist.irecv(data, src=rank, group=group), seconds)
        return torch.load(io.BytesIO(data.numpy().tobytes()), weights_only=False)

    def finish(self, code: int) -> None:
        """The end of a command every rank ran: all wait until every rank is here (rank 0's
        report written), then rank 0 leaves first with `code` and each other rank once rank
        0 is gone — a launcher that ends the other ranks when one exits (torchrun) ends none
        in the middle of the report, and a SIGTERM now leaves with `code` too."""
        import signal

        import torch.distributed as dist

        from gradscope import process

        process.handle(signal.SIGTERM, lambda signum, frame: process.leave(code))
        with suppress(Exception):
            dist.barrier(group=self._commands)
        if self.rank != 0:
            with suppress(Exception):  # (rank 0 closing its connections ends the wait)
                self._receive(0, self._commands, 2 * GRACE)
        for stream in (sys.stdout, sys.stderr):
            with suppress(OSError, ValueError):
                stream.flush()
        process.leave(code)

    def leave(self) -> None:
        """The process groups ended (where this world made them)."""
        import torch.distributed as dist

        if self._ours and dist.is_initialized():
            with suppress(Exception):
                dist.destroy_process_group()


def _gpu_for(where: Place) -> None:
    """This rank's GPU (its local rank's), or why there is none."""
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if where.local_rank >= count:
        raise UsageError(f"--device cuda: rank {where.rank} (local rank {where.local_rank}) "
                         f"has no GPU of its own: this machine has {count}; start at most "
                         f"{count} rank(s) a node")
    torch.cuda.set_device(where.local_rank)


class Local:
    """Rank 0's own part of each command, run on a thread of its own — always the same one:
    rank 0 asks for its gradients from inside gradscope's own backward (the ranks' target is
    one autograd node), and the user's backward must run as the top of a backward of its own,
    as on every other rank (FSDP's hooks queue their reduce-scatter on the backward they run
    in, which would be gradscope's)."""

    def __init__(self) -> None:
        self._asked: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None

    def run(self, fn: Callable[[tuple], Any], command: tuple) -> Any:
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="gradscope-rank-0",
                                            daemon=True)
            self._thread.start()
        done: queue.Queue = queue.Queue()
        self._asked.put((fn, command, done))
        while True:  # (in short waits: a --timeout or a signal reaches the main thread)
            try:
                ok, value = done.get(timeout=0.1)
            except queue.Empty:
                continue
            if ok:
                return value
            raise value

    def _serve(self) -> None:
        while True:
            fn, command, done = self._asked.get()
            try:
                done.put((True, fn(command)))
            except BaseException as exc:  # (raised again on the asking thread)
                done.put((False, exc))


def _wait(work: Any, seconds: float) -> None:
    try:
        done = work.wait(timeout=timedelta(seconds=seconds))
    except RuntimeError as exc:
        if "timed out" in str(exc).lower() or "timeout" in type(exc).__name__.lower():
            raise TimeoutError(str(exc)) from None
        raise
    if done is False:
        raise TimeoutError(f"no message within {seconds:g} s")


def _first(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


def _rank_failed(rank: int, message: str, hang: bool = False) -> TargetError:
    error = TargetError(f"the distributed target failed: {message}", during="forward",
                        error="rank", detail=message)
    error.rank, error.consequence = rank, hang  # type: ignore[attr-defined]
    return error


def _first_failure(failed: list[tuple[int, GradscopeError]]) -> GradscopeError:
    """The error to report of several ranks': a bad request as it is (every rank says it
    alike); else the first rank whose own code failed, before ranks that only waited for it
    (a collective's timeout, a rank that died: consequences)."""
    usage = [e for _, e in failed if e.exit_code == UsageError.exit_code]
    if usage:
        return usage[0]
    causes = [(r, e) for r, e in failed if not getattr(e, "consequence", False)]
    rank, error = (causes or failed)[0]
    if isinstance(error, TargetError) and "on rank" not in str(error) \
            and getattr(error, "error", "") != "rank":
        return _on_rank(rank, error)
    return error


def marked(error: GradscopeError) -> GradscopeError:
    """`error` marked a consequence where torch.distributed raised it (a collective that
    timed out or lost its peer: another rank's failure, which is the one to name); the mark
    travels with it (its own data, unlike `__cause__`)."""
    import torch.distributed as dist

    dist_error = getattr(dist, "DistError", None)
    if dist_error is not None and isinstance(error.__cause__, dist_error):
        error.consequence = True  # type: ignore[attr-defined]
    return error


def _on_rank(rank: int, error: TargetError) -> TargetError:
    message = f"rank {rank}: {error}"
    named = TargetError(f"the distributed target failed on {message}", during=error.during,
                        error=error.error or "rank", detail=message, frames=error.frames)
    named.rank = rank  # type: ignore[attr-defined]
    return named


_joined: World | None = None


def joined(device: str = "cpu") -> World | None:
    """This process's world (joined at the first call), or None where no launcher placed it
    in one. A process a rank started (it inherits the rank's environment) is no rank."""
    global _joined
    if _joined is None:
        owner = os.environ.get(RANK_PID)
        if owner and owner != str(os.getpid()):
            raise UsageError("this process was started by a rank of a distributed check "
                             f"(pid {owner}) and is no rank itself: it cannot start or join "
                             "ranks of its own")
        where = place()
        if where is None:
            return None
        _joined = World(where, device)
        os.environ[RANK_PID] = str(os.getpid())
        if not os.environ.get(TAG):  # (torchrun's or srun's rank: what it starts is ended
            # with it, as a launch of ours ends what its ranks start)
            from gradscope.process import end_tagged

            os.environ[TAG] = tag = f"{os.getpid()}:{uuid.uuid4().hex}"
            atexit.register(end_tagged, TAG, tag)
    return _joined


def current() -> World | None:
    """The world this process joined, if any (nothing is joined here)."""
    return _joined


def quiet() -> bool:
    """Whether this process is a rank other than 0 of a world it joined: rank 0 writes the
    report, the others write nothing."""
    return _joined is not None and _joined.rank != 0


__all__ = ["ANSWER_SECONDS", "BUILD_SECONDS", "MAX_MESSAGE", "RANK_PID", "TAG", "World",
           "current", "joined", "quiet"]

