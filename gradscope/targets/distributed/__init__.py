"""--nproc N: distributed code checked across ranks — the run mode (`MODE`), the ranks'
processes and their evaluations (launch, rank), and the coordinator's view of them as one
target (target). The mode builds that target itself: the ranks start, each building the
target and binding its inputs as one process would, and every evaluation is an ordinary call
on every rank. Imported lazily: torch.multiprocessing and torch.distributed stay out of every
other run (this module imports none of its siblings until the mode is asked for)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import torch

from gradscope.errors import UsageError
from gradscope.options import Options
from gradscope.targets.mode import Mode

if TYPE_CHECKING:
    from gradscope.inputs.bind import Bound
    from gradscope.targets.distributed.target import DistributedTarget

# seconds a collective waits for the other ranks before the check ends on every rank
COLLECTIVE_TIMEOUT = 60.0


def start(target: str, base: str | None, options: Options, timeout: float
          ) -> DistributedTarget:
    """The target of `options.nproc` ranks, running (stop them with `.finished()`)."""
    from gradscope.targets.distributed.launch import INSIDE, Ranks, free_port
    from gradscope.targets.distributed.rank import RankSpec
    from gradscope.targets.distributed.target import DistributedTarget

    if os.environ.get(INSIDE):  # (a target file that runs a check of its own at import)
        raise UsageError(f"--nproc {options.nproc}: this process is a rank of a distributed "
                         "check already, and a check inside a rank cannot start ranks of its "
                         "own (each rank would start more); run it under "
                         "`if __name__ == \"__main__\":`, not at import")
    ranks = Ranks(RankSpec(target, base, options, options.nproc, free_port(), timeout))
    try:
        return DistributedTarget(ranks, options.sharded, options.replicated,
                                 options.partial_grad)
    except BaseException:
        ranks.stop()
        raise


class Distributed(Mode):
    option = "nproc"
    needs = ("context", "sharded", "replicated", "after_backward", "partial_grad",
             "compare_single")
    purpose = "distributed code"
    builds = True

    def adjusted(self, options: Options) -> Options:
        if options.order == 2 or options.tangent or options.device != "cpu":
            raise UsageError("--nproc checks first-order gradients on the CPU (gloo): leave out "
                             "--order 2, --tangent and --device")
        # (the coordinator evaluates the ranks the ordinary way: each evaluation an ordinary
        # call on every rank)
        return options.updated(plain=True)

    def build(self, request: Any, options: Options) -> tuple[DistributedTarget, Bound]:
        from gradscope.inputs.bind import DTYPES, Bound, Upstream
        from gradscope.inputs.text import InputValue

        if request.command not in ("check", "jvp", "jacobian") or not isinstance(
                request.target, str):
            raise UsageError("--nproc runs FILE.py:NAME targets of check, jvp and jacobian")
        target = start(request.target, str(request.base) if request.base else None, options,
                       COLLECTIVE_TIMEOUT)
        try:
            dtype = DTYPES[options.dtype]
            values = {n: InputValue(t.detach().to(torch.float64), target.origins[n])
                      for n, t in target.given.items()}
            bound = Bound(values, {n: v.tensor.to(dtype) for n, v in values.items()},
                          Upstream.read(options), None, dtype, torch.device("cpu"))
        except BaseException:
            target.finished()
            raise
        return target, bound


MODE = Distributed()

__all__ = ["COLLECTIVE_TIMEOUT", "MODE", "start"]
