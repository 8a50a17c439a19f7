"""--nproc N: distributed code checked across ranks — the run mode (`MODE`). The check is
collective, run on every rank of a world torch's launchers make (world.py): started here
through torch's elastic launch where this process is a plain one (launch.py, agent.py,
worker.py), or joined where torchrun or srun started this process as one of its ranks. Rank 0
runs the stages over the ranks' target (target.py: the ranks seen as one function), every
evaluation an ordinary call on every rank (rank.py); every rank ends with rank 0's report.
Imported lazily: torch.distributed stays out of every other run (this module imports none of
its siblings until the mode is asked for)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from gradscope.errors import GradscopeError, TargetError, UsageError
from gradscope.options import Options
from gradscope.targets.mode import Mode

if TYPE_CHECKING:
    from gradscope.inputs.bind import Bound
    from gradscope.report.model import Report
    from gradscope.targets.distributed.target import DistributedTarget
    from gradscope.targets.distributed.world import World

# seconds a collective waits for the other ranks before the check ends on every rank
COLLECTIVE_TIMEOUT = 60.0
COMMANDS = ("check", "jvp", "jacobian")


class Distributed(Mode):
    option = "nproc"
    needs = ("context", "sharded", "replicated", "after_backward", "partial_grad",
             "compare_single")
    purpose = "distributed code"
    builds = True
    runs = True

    def adjusted(self, options: Options) -> Options:
        if options.order == 2 or options.tangent:
            raise UsageError("--nproc checks first-order gradients: leave out --order 2 and "
                             "--tangent")
        if options.device != "cpu" and not options.device.startswith("cuda"):
            raise UsageError(f"--nproc runs on cpu (gloo) or cuda (nccl, a GPU per rank), not "
                             f"--device {options.device}")
        # (rank 0 evaluates the ranks the ordinary way: each evaluation an ordinary call on
        # every rank)
        return options.updated(plain=True)

    def run(self, request: Any, here: Callable[[Any], Report]) -> Report:
        """The check on every rank: joined where a launcher made this process a rank, else
        started here on `--nproc` ranks; rank 0 runs `here` (the stages)."""
        from gradscope.targets.distributed import world as worlds
        from gradscope.targets.mode import adjusted, asked

        _refuse_other(request)
        options = request.options.validate()
        from gradscope import targets as registry

        adjusted(asked(registry.MODES, options), options)  # (bad options: said here, once)
        joined = worlds.joined(options.device)
        if joined is None:
            from gradscope.targets.distributed.launch import launched

            _gpus_for(options)
            return launched(("check", _sendable(request)), options.nproc)
        return collective(joined, request, here)

    def build(self, request: Any, options: Options) -> tuple[DistributedTarget, Bound]:
        from gradscope.inputs.bind import DTYPES, Bound, Upstream
        from gradscope.inputs.text import InputValue

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


def _refuse_other(request: Any) -> None:
    from gradscope.targets.loading import is_python_target

    if request.command not in COMMANDS or not isinstance(request.target, str) \
            or not is_python_target(request.target):
        raise UsageError("--nproc runs FILE.py:NAME targets of check, jvp and jacobian")


def _gpus_for(options: Options) -> None:
    """--device cuda on this machine: a GPU for each rank (nccl), or why not."""
    if not options.device.startswith("cuda"):
        return
    from gradscope.inputs.bind import device_of

    device_of("cuda")  # (no GPU at all: said as one process says it)
    count = torch.cuda.device_count()
    if options.nproc > count:
        raise UsageError(f"--nproc {options.nproc} --device cuda: each rank needs a GPU of its "
                         f"own (nccl), and this machine has {count}")


def _sendable(request: Any) -> Any:
    """The request as the ranks get it: no progress bars (a terminal's, here)."""
    from dataclasses import replace

    return replace(request, progress=None)


def collective(world: World, request: Any, here: Callable[[Any], Report]) -> Report:
    """One check on every rank of `world`: rank 0 runs `here` and tells the others its
    outcome, which every rank returns (or raises)."""
    from gradscope.targets.distributed.place import nested

    nproc = request.options.nproc
    if world.claimed:  # (a target file that runs a check of its own at import)
        raise nested(nproc)
    if nproc != world.size:
        raise UsageError(f"--nproc {nproc}: this process is one of {world.size} ranks "
                         f"{world.launcher} started; give --nproc {world.size}, or leave it "
                         "out under torchrun and srun")
    world.claimed = True
    try:
        if world.rank != 0:
            from gradscope.targets.distributed.rank import Server

            kind, payload = world.serve(Server(world.device).handle)
            if kind == "error":
                raise payload
            return payload
        try:
            report = here(request)
        except GradscopeError as exc:
            world.stop(("error", exc))
            raise
        except BaseException as exc:
            world.stop(("error", TargetError(f"rank 0 stopped the check ({type(exc).__name__})"
                                             )))
            raise
        world.stop(("report", report))
        return report
    finally:
        world.claimed = False


def start(target: str, base: str | None, options: Options, timeout: float
          ) -> DistributedTarget:
    """On rank 0 of a claimed world: the ranks' target, every rank's part built."""
    from gradscope.targets.distributed import world as worlds
    from gradscope.targets.distributed.rank import RankSpec, Server
    from gradscope.targets.distributed.target import DistributedTarget, Ranks

    world = worlds.current()
    if world is None or not world.claimed or world.rank != 0:
        raise UsageError(f"--nproc {options.nproc}: the ranks' target is built on rank 0 of a "
                         "running check (gradscope.check(..., nproc=N) starts one)")
    spec = RankSpec(target, base, options, world.size, timeout)
    ranks = Ranks(world, Server(world.device), spec)
    try:
        ranks.build()
        return DistributedTarget(ranks, options.sharded, options.replicated,
                                 options.partial_grad)
    except BaseException:
        ranks.stop()
        raise


def launched_world() -> int | None:
    """The size of the world torchrun or srun made this process a rank of (the CLI's
    --nproc where none is given), or None."""
    from gradscope.targets.distributed.place import TAG, place

    if os.environ.get(TAG):
        return None  # (gradscope's own ranks are given their request)
    where = place()
    return None if where is None else where.size


MODE = Distributed()

__all__ = ["COLLECTIVE_TIMEOUT", "MODE", "collective", "launched_world", "start"]
