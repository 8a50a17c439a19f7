"""Distributed code checked across ranks (--nproc N): the ranks' processes and their
evaluations (launch, rank), and the coordinator's view of them as one target (target).
Imported only where --nproc asks for it: torch.multiprocessing and torch.distributed stay out
of every other run."""

from __future__ import annotations

from gradscope.distributed.launch import Ranks, free_port
from gradscope.distributed.rank import RankSpec
from gradscope.distributed.target import DistributedTarget
from gradscope.options import Options

__all__ = ["DistributedTarget", "RankSpec", "Ranks", "start"]


def start(target: str, base: str | None, options: Options, timeout: float
          ) -> DistributedTarget:
    """The target of `options.nproc` ranks, running (stop them with `.finished()`)."""
    ranks = Ranks(RankSpec(target, base, options, options.nproc, free_port(), timeout))
    try:
        return DistributedTarget(ranks, options.sharded, options.replicated,
                                 options.partial_grad)
    except BaseException:
        ranks.stop()
        raise
