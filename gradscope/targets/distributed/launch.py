"""`--nproc N` from a plain process: the ranks started through torch's elastic launch (the API
behind torchrun), in an agent process of their own (agent.py: its signal handlers and its
environment are torch's, never the caller's), each rank a worker (worker.py) that joins the
world and runs the job it is given — rank 0 the check itself, the others its evaluations — and
rank 0's outcome (the report, or the error) read back from a folder of the launch's own.

Nothing outlives a launch: every process it starts carries a tag in its environment
(TAG=<this pid>:<nonce>), inherited by all they start; when the launch ends — done, failed, at
--timeout, SIGTERM or Ctrl-C, while the ranks still start — the agent is told to stop (it ends
its workers' process groups), then every process still tagged is killed wherever it went (a
child in a session of its own, an orphan). The agent and its workers die with their parent
(PR_SET_PDEATHSIG), and the agent adopts its orphans (a subreaper)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import suppress
from pathlib import Path
from typing import Any

import torch

from gradscope.errors import GradscopeError, TargetError, UsageError
from gradscope.process import end_tagged, shielded
from gradscope.targets.distributed.place import RANK_PID, TAG

MOST_RANKS = 16  # a check's ranks on one machine share its cores
GRACE = 5.0  # seconds the agent gets to end its workers before it is killed
PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])  # where `import gradscope` finds us
AGENT = "from gradscope.targets.distributed.agent import main; main()"
JOB, OUTCOME, FAILURES = "job.pt", "outcome.pt", "failures.pt"


def inside() -> bool:
    """Whether this process belongs to a launch (a rank, or what a rank started)."""
    return bool(os.environ.get(TAG))


def launched(job: tuple, nproc: int, internal: bool = False) -> Any:
    """`job` run on `nproc` ranks started here; rank 0's outcome: its report or answer (an
    error of the check raised here as it was raised there). `internal`: gradscope's own launch
    from inside a rank (--compare-single's world of one)."""
    if not 1 <= nproc <= MOST_RANKS:
        raise UsageError(f"--nproc {nproc}: give a number of processes from 1 to {MOST_RANKS} "
                         "(more, or across machines: start gradscope with torchrun)")
    if inside() and not internal:
        raise UsageError(f"--nproc {nproc}: this process is a rank of a distributed check "
                         "already, and a check inside a rank cannot start ranks of its own "
                         "(each rank would start more); run it under `if __name__ == "
                         "\"__main__\":`, not at import")
    with tempfile.TemporaryDirectory(prefix="gradscope-ranks-") as folder:
        torch.save(job, Path(folder) / JOB)
        agent = Agent(Path(folder), nproc)
        try:
            agent.wait()
        finally:
            agent.stop()
        return _outcome(Path(folder), nproc)


class Agent:
    """The elastic agent's process and the tag of everything it starts."""

    def __init__(self, folder: Path, nproc: int) -> None:
        self.folder = folder
        self.tag = f"{os.getpid()}:{uuid.uuid4().hex}"
        # (a launch from inside a rank, --compare-single's: its ranks are no children of
        # that rank's, and the agent gives them their world anew)
        env = {k: v for k, v in os.environ.items() if k != RANK_PID}
        env.update({TAG: self.tag, "PYTHONPATH": os.pathsep.join(
            p for p in (PACKAGE_ROOT, os.environ.get("PYTHONPATH", "")) if p)})
        # (stopped between the fork and the record, an agent would be left running)
        with shielded():
            self.process = subprocess.Popen(
                [sys.executable, "-c", AGENT, str(folder), str(nproc), str(os.getpid())],
                stdin=subprocess.DEVNULL, stdout=_stderr(), env=env, start_new_session=True)

    def wait(self) -> None:
        """Until the agent ends, or rank 0's outcome is written and the agent had GRACE
        seconds more to end its workers."""
        written: float | None = None
        while self.process.poll() is None:
            if written is None and (self.folder / OUTCOME).exists():
                written = time.monotonic()
            if written is not None and time.monotonic() - written > GRACE:
                return
            with suppress(subprocess.TimeoutExpired):
                self.process.wait(0.05)

    def stop(self) -> None:
        """The agent told to end its workers (SIGTERM), killed after GRACE; then every
        process of the launch still alive killed, wherever it is."""
        with shielded():  # (a --timeout or Ctrl-C now: after it)
            if self.process.poll() is None:
                with suppress(OSError):
                    self.process.terminate()
                with suppress(subprocess.TimeoutExpired):
                    self.process.wait(GRACE + 1.0)
            with suppress(OSError):
                os.killpg(self.process.pid, signal.SIGKILL)
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait()
            end_tagged(TAG, self.tag)


def _stderr() -> int | None:
    """What the ranks print goes to stderr (stdout may be the report's JSON document)."""
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # (a captured stderr with no descriptor)
        return subprocess.DEVNULL


def _outcome(folder: Path, nproc: int) -> Any:
    """Rank 0's outcome, or why there is none (the ranks that failed and how)."""
    written = folder / OUTCOME
    if written.exists():
        kind, payload = torch.load(written, weights_only=False)
        if kind == "error":
            raise payload
        if kind == "crash":
            raise RuntimeError(f"a rank of the distributed check failed inside gradscope:\n"
                               f"{payload}")
        return payload
    said = _said(folder, nproc)
    raise TargetError(f"the distributed target failed on {said}", during="forward",
                      error="rank", detail=said)


def _said(folder: Path, nproc: int) -> str:
    """The first rank that said why it failed, else the first the agent saw end badly."""
    for rank in range(nproc):
        own = folder / f"rank{rank}.error"
        if own.exists():
            return f"rank {rank}: {own.read_text(errors='replace')}"
    failures = folder / FAILURES
    if failures.exists():
        ended: dict[int, int] = torch.load(failures, weights_only=False)
        for rank, code in sorted(ended.items()):
            how = (f"killed by {signal.Signals(-code).name}" if code < 0 and -code in
                   signal.Signals._value2member_map_ else f"exit code {code}")
            return f"rank {rank}: it died without a reply ({how})"
    return "its ranks: they ended before rank 0 wrote its outcome"


def write_outcome(folder: Path, outcome: tuple) -> None:
    """Rank 0's outcome, written whole or not at all (the launcher reads it once it exists)."""
    part = folder / (OUTCOME + ".part")
    try:
        torch.save(outcome, part)
    except Exception as exc:  # (a report that does not pickle: said, never lost silently)
        if isinstance(outcome[1], GradscopeError):
            raise
        torch.save(("crash", f"the outcome could not be written: {exc}"), part)
    part.replace(folder / OUTCOME)


__all__ = ["MOST_RANKS", "TAG", "inside", "launched", "write_outcome"]
