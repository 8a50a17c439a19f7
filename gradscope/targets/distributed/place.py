"""Where a launcher put this process: its place in a world read from the environment —
torchrun and torch's elastic launch set RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and
MASTER_PORT; SLURM's srun sets SLURM_PROCID, SLURM_STEP_NUM_TASKS and SLURM_LOCALID, and rank
0's host is MASTER_ADDR or the first of the job's nodes — and the environment torchrun gives
its processes, set for a launcher that gives less."""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass

from gradscope.errors import UsageError

# every process of a launch carries it (launch.py): the launching process's pid and a nonce
TAG = "GRADSCOPE_RANK_OF"
RANK_PID = "GRADSCOPE_RANK_PID"  # a rank's own pid, set as it joins (its children inherit it)


@dataclass(frozen=True)
class Place:
    """Where the environment puts this process: its rank of `size`, its local rank (its GPU),
    the rendezvous address, and who launched it."""

    rank: int
    size: int
    local_rank: int
    addr: str
    port: int
    launcher: str  # "torchrun" (torch's elastic launch, ours too), "srun", "env"


def place(environ: Mapping[str, str] | None = None) -> Place | None:
    """This process's place in a world from its launcher's environment, or None (a plain
    process)."""
    env = os.environ if environ is None else environ
    if "RANK" in env and "WORLD_SIZE" in env and "MASTER_ADDR" in env \
            and "MASTER_PORT" in env:
        launcher = "gradscope" if env.get(TAG) and not env.get(RANK_PID) else \
            "torchrun" if "TORCHELASTIC_RUN_ID" in env else "env"
        return Place(_int(env, "RANK"), _int(env, "WORLD_SIZE"),
                     _int(env, "LOCAL_RANK", env.get("RANK", "0")), env["MASTER_ADDR"],
                     _int(env, "MASTER_PORT"), launcher)
    # (srun's, for each task of a step; a batch script's shell has SLURM_NTASKS for the whole
    # allocation but runs alone: taking it for a world would wait for ranks never started)
    tasks = env.get("SLURM_STEP_NUM_TASKS")
    if "SLURM_PROCID" in env and tasks and tasks.isdigit() and int(tasks) > 1:
        nodes = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or \
            env.get("SLURM_NODELIST") or ""
        addr = env.get("MASTER_ADDR") or first_host(nodes)
        if not addr:
            raise UsageError("srun started this process, but neither MASTER_ADDR nor "
                             "SLURM_JOB_NODELIST says where rank 0 is: export MASTER_ADDR")
        job = env.get("SLURM_JOB_ID", "0")
        port = env.get("MASTER_PORT") or str(10000 + int(job if job.isdigit() else 0) % 20000)
        return Place(_int(env, "SLURM_PROCID"), int(tasks),
                     _int(env, "SLURM_LOCALID", "0"), addr, int(port), "srun")
    return None


def _int(env: Mapping[str, str], key: str, default: str | None = None) -> int:
    value = env.get(key, default)
    if value is None or not value.strip().isdigit():
        raise UsageError(f"the launcher's {key}={value!r} is not a number (torchrun and srun "
                         "set it to one)")
    return int(value)


def first_host(nodes: str) -> str:
    """The first host of a SLURM host list (`gpu[03-05,9],cpu1` → `gpu03`)."""
    found = re.match(r"([^,\[]+)(?:\[([^\],-]+))?", nodes.strip())
    if not found:
        return ""
    return found.group(1) + (found.group(2) or "")


def environment(where: Place) -> None:
    """What torchrun sets for each of its processes, for a launcher that sets less (srun):
    the user's code may read them; gloo held to the loopback where rank 0 is on it."""
    os.environ.update(RANK=str(where.rank), WORLD_SIZE=str(where.size),
                      LOCAL_RANK=str(where.local_rank), MASTER_ADDR=where.addr,
                      MASTER_PORT=str(where.port))
    if where.addr in ("127.0.0.1", "localhost") and "GLOO_SOCKET_IFNAME" not in os.environ:
        names = {name for _, name in socket.if_nameindex()}
        if "lo" in names:
            os.environ["GLOO_SOCKET_IFNAME"] = "lo"


def nested(nproc: int) -> UsageError:
    """The refusal of a distributed check asked for inside a rank of one (a target file that
    runs a check of its own at import: each rank would start, or join, ranks of its own)."""
    return UsageError(f"--nproc {nproc}: this process is a rank of a distributed check "
                      "already, and a check inside a rank cannot start ranks of its own (each "
                      "rank would start more); run it under `if __name__ == \"__main__\":`, "
                      "not at import")
