"""--compare-single: the same target at world size 1, at the same values, beside the ranks.
A gradient check compares autograd with the function the code computes; where the distributed
forward itself is wrong (a missing all-reduce in forward) both follow it. One process running
the same code is the usual reference: its output and gradients must be those of the ranks.

The world of one is a launch of its own (launch.py), started by rank 0; its rank builds the
target, compares what it built with the ranks' wholes and answers at the same values
(`answered`). Only what one process holds the same way is compared: replicated tensors, and a
DTensor's shards joined along their Shard dim. Where the code builds other values at world size
1 (each rank seeding its own shard), nothing of it is compared and the run says so."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from gradscope.targets.distributed.rank import RankSpec
from gradscope.targets.distributed.target import DistributedTarget, ratio


@dataclass(frozen=True)
class Apart:
    """What differs at world size 1: `name` ("output" or a tensor's gradient), by how much."""

    name: str
    apart: float
    scale: float
    factor: float | None = None  # the ranks' = factor × one process's, where it is


@dataclass(frozen=True)
class SingleRun:
    compared: tuple[str, ...]  # what was compared ("output" and tensors' gradients)
    differing: tuple[Apart, ...]
    incomparable: tuple[str, ...]  # tensors built with other values or shapes at world 1


@dataclass(frozen=True)
class Alone:
    """The world of one's answer: its output and gradients at the ranks' values, or the
    tensors it built otherwise (then nothing was evaluated)."""

    incomparable: tuple[str, ...]
    output: torch.Tensor | None = None
    grads: dict[str, torch.Tensor] | None = None


def compare_single(target: DistributedTarget, values: dict[str, torch.Tensor],
                   upstream: torch.Tensor, output: torch.Tensor,
                   grads: dict[str, torch.Tensor], rtol: float, atol: float) -> SingleRun:
    """The target at world size 1 beside the ranks' `output` and `grads` at `values`."""
    from gradscope.targets.distributed.launch import launched

    ours, ours_grads = target.wholes(values), target.wholes(grads)
    inputs = {n: t for n, t in ours.items() if t is not None and n not in target.parameters}
    options = target.spec.options
    spec = replace(target.spec, world=1,
                   options=options.updated(at={**options.at, **inputs}, shape={}))
    alone: Alone = launched(("single", spec, ours, upstream, tuple(output.shape), rtol, atol),
                            1, internal=True)
    if alone.output is None or alone.grads is None:
        return SingleRun((), (), alone.incomparable)
    same = [n for n in ours if n not in alone.incomparable]
    pairs = [("output", output, alone.output)] + [
        (n, ours_grads[n], alone.grads[n]) for n in same if ours_grads[n] is not None]
    differing = tuple(Apart(n, float((a.double() - b.double()).abs().max()),
                            float(b.double().abs().max()), ratio(b.double(), a.double()))
                      for n, a, b in pairs if not torch.allclose(
                          a.double(), b.double(), rtol=10 * rtol, atol=10 * atol))
    return SingleRun(tuple(n for n, _, _ in pairs), differing, alone.incomparable)


def answered(spec: RankSpec, ours: dict[str, torch.Tensor | None], upstream: torch.Tensor,
             shape: tuple[int, ...], rtol: float, atol: float) -> Alone:
    """On the world of one's rank: the target built, compared with the ranks' wholes `ours`,
    and evaluated at them where every one is the same here."""
    from gradscope.rng import seeded
    from gradscope.targets.distributed import world as worlds
    from gradscope.targets.distributed.rank import Server

    world = worlds.joined(spec.options.device)
    server = Server(world.device if world is not None else "cpu")
    alone = server.handle(("build", spec)).values
    same, incomparable = {}, []
    for name, whole in ours.items():
        theirs = alone.get(name)
        if whole is None or theirs is None or whole.shape != theirs.shape or not \
                torch.allclose(whole.double(), theirs.double(), rtol=rtol, atol=atol):
            incomparable.append(name)
        else:
            same[name] = whole
    if incomparable:  # another function at world size 1: nothing of it says anything
        return Alone(tuple(incomparable))
    at = {**alone, **same}
    with seeded(spec.options.seed):
        out = server.handle(("value", at))
        if tuple(out.shape) != shape:
            return Alone(("output",))
        out, grads = server.handle(("grad", at, upstream))
    return Alone((), out, grads)
