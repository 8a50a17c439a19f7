"""The agent process of a launch (launch.py): torch's elastic launch — the API torchrun runs —
starting N workers of this Python on one machine, their rendezvous on 127.0.0.1 (torch's c10d
store on a port it picks), no restarts (a check that failed once has its answer), and the
ranks that ended badly written for the launcher to name. It dies with the launching process
and adopts the orphans of its workers."""

from __future__ import annotations

import logging
import os
import socket
import sys
import uuid
from pathlib import Path

from gradscope import process

WORKER = "from gradscope._rank import main; main()"
START_SECONDS = 180  # the rendezvous: every worker's start (importing torch) on a loaded machine
SHUTDOWN_SECONDS = 5  # what a worker gets after SIGTERM before SIGKILL


def main() -> None:
    folder, nproc, parent = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    process.die_with_parent(parent)
    process.subreaper()
    names = {name for _, name in socket.if_nameindex()}
    if "lo" in names:  # (gloo would otherwise pick the host's first interface)
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    # torch's launcher logs each worker's failure; the launcher says it in one line of its own
    logging.getLogger("torch.distributed.elastic").setLevel(logging.CRITICAL)
    import torch
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    config = LaunchConfig(
        min_nodes=1, max_nodes=1, nproc_per_node=nproc, run_id=uuid.uuid4().hex,
        rdzv_backend="c10d", rdzv_endpoint="127.0.0.1:0", local_addr="127.0.0.1",
        rdzv_configs={"timeout": START_SECONDS}, max_restarts=0, monitor_interval=0.05,
        shutdown_timeout=SHUTDOWN_SECONDS)
    try:
        elastic_launch(config, sys.executable)("-c", WORKER, str(folder))
    except ChildFailedError as exc:
        torch.save({int(rank): int(f.exitcode) for rank, f in exc.failures.items()},
                   folder / "failures.pt")
        sys.exit(1)


if __name__ == "__main__":
    main()
