"""A worker of a launch (targets/distributed/launch.py): one rank, started by torch's elastic
agent with torchrun's environment, tagged with the launch's tag. It joins the world (world.py),
runs the job of the launch — a check (rank 0 runs its stages, the others its evaluations) or a
world of one's answer (--compare-single) — and rank 0 writes the outcome for the launcher.
What the rank prints goes to stderr; a rank ends with its launcher (PR_SET_PDEATHSIG)."""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path
from typing import Any

from gradscope import process


def main() -> None:
    folder, tag = Path(sys.argv[1]), sys.argv[2]
    _tagged(tag)
    process.die_with_parent(os.getppid())
    os.dup2(2, 1)  # (its prints never reach the launcher's stdout)
    process.install()
    import torch

    torch.set_num_threads(1)  # the ranks share the machine's cores
    rank = int(os.environ.get("RANK", "0"))
    try:
        job = torch.load(folder / "job.pt", weights_only=False)
        outcome = _performed(job)
    except BaseException as exc:  # (said to the launcher, whatever it is)
        (folder / f"rank{rank}.error").write_text(_said(exc))
        process.leave(1)
    if rank == 0:
        from gradscope.targets.distributed.launch import write_outcome

        write_outcome(folder, outcome)
    sys.stdout.flush()
    sys.stderr.flush()
    process.leave(0)


def _tagged(tag: str) -> None:
    """This process started again with the launch's tag in its environment, before anything
    else runs: all it starts inherits it, forks that never exec too (what /proc shows of a
    process's environment is what it was started with). Not a rank of another check's: the
    launcher's rank pid is not its own."""
    from gradscope.targets.distributed.place import RANK_PID, TAG

    if os.environ.get(TAG) != tag or RANK_PID in os.environ:
        env = {k: v for k, v in os.environ.items() if k != RANK_PID}
        env[TAG] = tag
        os.execve(sys.executable, sys.orig_argv, env)


def _performed(job: tuple) -> tuple[str, Any]:
    """The job's outcome on this rank: ("report", …), ("answer", …), ("error", a
    GradscopeError), or ("crash", a traceback of gradscope's own)."""
    from gradscope.errors import GradscopeError, Stopped, TargetError

    try:
        if job[0] == "check" and os.environ.get("RANK", "0") != "0":
            return ("report", _served(job[1]))  # (the stages are rank 0's: not imported)
        if job[0] == "check":
            from gradscope import api

            return ("report", api.run(job[1]))
        from gradscope.targets.distributed.single import answered

        return ("answer", answered(*job[1:]))
    except GradscopeError as exc:
        return ("error", exc)
    except Stopped as exc:
        return ("error", TargetError(f"the distributed check was stopped: {exc.reason()}"))
    except Exception:
        return ("crash", traceback.format_exc())


def _served(request: Any) -> Any:
    """A rank other than 0's part of the check: rank 0's evaluations served until its
    outcome."""
    from gradscope.targets.distributed import collective
    from gradscope.targets.distributed.world import joined

    world = joined(request.options.device)
    if world is None:  # (no launcher's environment: not a worker of a launch)
        raise RuntimeError("a rank of a launch has no RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT")
    return collective(world, request, lambda _: None)  # type: ignore[arg-type,return-value]


def _said(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:500]


if __name__ == "__main__":
    main()
