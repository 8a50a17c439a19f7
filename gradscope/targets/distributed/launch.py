"""`--nproc N` from a plain process: the ranks started through torch's elastic launch (the API
behind torchrun), its agent on a thread of this process, each rank a worker of this Python
(gradscope/_rank.py) that joins the world and runs the job it is given — rank 0 the check
itself, the others its evaluations — and rank 0's outcome (the report, or the error) read back
from a folder of the launch's own. The agent's rendezvous is on 127.0.0.1 (torch's c10d store
on a port it picks), with no restarts (a check that failed once has its answer); on a thread of
its own it installs no signal handler (gradscope's stay).

Nothing outlives a launch: every worker carries the launch's folder in its arguments and sets
its tag in its environment before anything of the user's runs (TAG=<this pid>:<nonce>), which
all it starts inherit; when the launch ends — done, failed, at --timeout, SIGTERM or Ctrl-C,
while the ranks still start — every process of it still alive is killed wherever it went (a
child in a session of its own, an orphan), and each worker dies with its launcher
(PR_SET_PDEATHSIG)."""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import threading
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from gradscope.errors import GradscopeError, TargetError, UsageError
from gradscope.process import end_tagged, shielded
from gradscope.targets.distributed.place import TAG, nested

MOST_RANKS = 16  # a check's ranks on one machine share its cores
GRACE = 5.0  # seconds the agent gets to notice its workers' end before it is left
START_SECONDS = 180  # the rendezvous: every worker's start (importing torch) on a loaded machine
PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])  # where `import gradscope` finds us
WORKER = (f"import sys; sys.path.insert(0, {PACKAGE_ROOT!r}); "
          "from gradscope._rank import main; main()")
JOB, OUTCOME = "job.pt", "outcome.pt"


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
        raise nested(nproc)
    with tempfile.TemporaryDirectory(prefix="gradscope-ranks-") as folder:
        torch.save(job, Path(folder) / JOB)
        agent = Agent(Path(folder), nproc)
        try:
            agent.wait()
        finally:
            agent.stop()
        return _outcome(agent)


class Agent:
    """torch's elastic agent on a thread of this process, and the tag of all it starts."""

    def __init__(self, folder: Path, nproc: int) -> None:
        self.folder = folder
        self.tag = f"{os.getpid()}:{uuid.uuid4().hex}"
        # rank → (exit code, when), of the ranks that ended badly
        self.failures: dict[int, tuple[int, float]] = {}
        self.error: BaseException | None = None  # the launch's own failure (the rendezvous)
        self.thread = threading.Thread(target=self._run, args=(nproc,), daemon=True,
                                       name="gradscope-elastic-agent")
        with shielded():  # (stopped between its start and the record: it would go on)
            self.thread.start()

    def _run(self, nproc: int) -> None:
        from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
        from torch.distributed.launcher.api import LaunchConfig, elastic_launch

        config = LaunchConfig(
            min_nodes=1, max_nodes=1, nproc_per_node=nproc, run_id=uuid.uuid4().hex,
            rdzv_backend="c10d", rdzv_endpoint="127.0.0.1:0", local_addr="127.0.0.1",
            rdzv_configs={"timeout": START_SECONDS}, max_restarts=0, monitor_interval=0.05,
            shutdown_timeout=int(GRACE))
        try:
            with _quiet_launcher():
                elastic_launch(config, sys.executable)("-c", WORKER, str(self.folder), self.tag)
        except ChildFailedError as exc:
            self.failures = {int(r): (int(f.exitcode), float(f.timestamp))
                             for r, f in exc.failures.items()}
        except Exception as exc:  # (said by the launcher, whatever it is)
            self.error = exc

    def wait(self) -> None:
        """Until the agent ends, or rank 0's outcome is written (the ranks are done with)."""
        while self.thread.is_alive() and not (self.folder / OUTCOME).exists():
            self.thread.join(0.05)

    def stop(self) -> None:
        """Every process of the launch still alive killed, wherever it is; the agent, whose
        workers are then gone, given GRACE seconds to notice and end."""
        with shielded():  # (a --timeout or Ctrl-C now: after it)
            end_tagged(TAG, self.tag, argv=str(self.folder))
            self.thread.join(GRACE)


@contextmanager
def _quiet_launcher() -> Any:
    """torch's launcher, quiet (it logs each worker's failure; the launch says it in one line
    of its own), and the environment it writes into put back."""
    loggers = [logging.getLogger(n) for n in ("torch.distributed.elastic",
                                              "torch.distributed.launcher",
                                              "torchelastic-events-null")]
    levels = [lg.level for lg in loggers]
    saved = os.environ.get("TORCHELASTIC_SIGNALS_TO_HANDLE")
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)
        if saved is None:
            os.environ.pop("TORCHELASTIC_SIGNALS_TO_HANDLE", None)
        else:
            os.environ["TORCHELASTIC_SIGNALS_TO_HANDLE"] = saved


def _outcome(agent: Agent) -> Any:
    """Rank 0's outcome, or why there is none (the ranks that failed and how)."""
    written = agent.folder / OUTCOME
    if written.exists():
        kind, payload = torch.load(written, weights_only=False)
        if kind == "error":
            raise payload
        if kind == "crash":
            raise RuntimeError(f"a rank of the distributed check failed inside gradscope:\n"
                               f"{payload}")
        return payload
    said = _said(agent)
    raise TargetError(f"the distributed target failed: {said}", during="forward",
                      error="rank", detail=said)


def _said(agent: Agent) -> str:
    """The first rank that said why it failed, else the first that ended badly."""
    import signal

    for own in sorted(agent.folder.glob("rank*.error"), key=lambda p: int(p.stem[4:])):
        return f"rank {own.stem[4:]}: {own.read_text(errors='replace')}"
    # (the first to end, before the ranks torch's agent then ended with SIGTERM itself)
    first = sorted(agent.failures.items(),
                   key=lambda f: (f[1][0] == -signal.SIGTERM, f[1][1], f[0]))
    for rank, (code, _) in first:
        how = (f"killed by {signal.Signals(-code).name}" if code < 0 and -code in
               signal.Signals._value2member_map_ else f"exit code {code}")
        return f"rank {rank}: it died without a reply ({how})"
    if agent.error is not None:
        first = (str(agent.error).strip().splitlines() or [type(agent.error).__name__])[0]
        return f"its ranks: torch's launcher failed ({type(agent.error).__name__}: {first})"
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


__all__ = ["MOST_RANKS", "WORKER", "inside", "launched", "write_outcome"]
