"""--compare-single: the same target at world size 1, at the same values, beside the ranks.
A gradient check compares autograd with the function the code computes; where the distributed
forward itself is wrong (a missing all-reduce in forward) both follow it. One process running
the same code is the usual reference: its output and gradients must be those of the ranks.

Only what one process holds the same way is compared: replicated tensors, and a DTensor's
shards joined along their Shard dim. Where the code builds other values at world size 1 (each
rank seeding its own shard), nothing of it is compared and the run says so."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from gradscope.targets.distributed.launch import Ranks, free_port
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


def compare_single(target: DistributedTarget, values: dict[str, torch.Tensor],
                   upstream: torch.Tensor, output: torch.Tensor,
                   grads: dict[str, torch.Tensor], rtol: float, atol: float) -> SingleRun:
    """The target at world size 1 beside the ranks' `output` and `grads` at `values`."""
    ours, ours_grads = target.wholes(values), target.wholes(grads)
    inputs = {n: t for n, t in ours.items() if t is not None and n not in target.parameters}
    options = target.spec.options
    spec = replace(target.spec, world=1, port=free_port(),
                   options=options.updated(at={**options.at, **inputs}, shape={}))
    ranks = Ranks(spec)
    try:
        alone = ranks.described[0].values
        same, incomparable = {}, []
        for name, whole in ours.items():
            theirs = alone.get(name)
            if whole is None or theirs is None or whole.shape != theirs.shape or not \
                    torch.allclose(whole.double(), theirs.double(), rtol=rtol, atol=atol):
                incomparable.append(name)
            else:
                same[name] = whole
        if incomparable:  # another function at world size 1: nothing of it says anything
            return SingleRun((), (), tuple(incomparable))
        at = {**alone, **same}
        out = ranks.ask([("value", at)])[0]
        if out.shape != output.shape:
            return SingleRun((), (), (*incomparable, "output"))
        out, their_grads = ranks.ask([("grad", at, upstream)])[0]
    finally:
        ranks.stop()
    pairs = [("output", output, out)] + [(n, ours_grads[n], their_grads[n]) for n in same
                                         if ours_grads[n] is not None]
    differing = tuple(Apart(n, float((a.double() - b.double()).abs().max()),
                            float(b.double().abs().max()), ratio(b.double(), a.double()))
                      for n, a, b in pairs if not torch.allclose(
                          a.double(), b.double(), rtol=10 * rtol, atol=10 * atol))
    return SingleRun(tuple(n for n, _, _ in pairs), differing, tuple(incomparable))
