"""Distributed targets (--nproc): a replicated tensor's gradient must be the same on every
rank — what each rank's optimiser steps with. A rank whose gradient differs from rank 0's
beyond round-off is a finding of its own (`ranks_disagree`, a failing kind: evidence about the
target the user named), naming the tensor, the rank and by how much; finite differences of
the global output decide which rank is right (the table compares rank 0's)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import torch

from gradscope.engines.base import estimated
from gradscope.features.base import Context, Diagnosis, Feature
from gradscope.report.model import Diagnostic

if TYPE_CHECKING:
    from gradscope.targets.distributed.target import Disagreement


class RankAgreement(Feature[None]):
    name = "ranks"

    def target_checks(self, ctx: Context) -> tuple[Diagnostic, ...]:
        ranks = ctx.prepared.target.ranks()
        return () if ranks is None else tuple(_diagnostic(d) for d in ranks.disagreements())

    def diagnose(self, ctx: Context, verdict: object, said: object) -> Diagnosis:
        found = self.target_checks(ctx)
        return Diagnosis(tuple(_partial(ctx, d) for d in found))


def _factor(d: Disagreement) -> str:
    return (f"; rank {d.rank}'s is {d.factor:.6g} × rank {d.against}'s" if d.factor is not None
            else "")


def _partial(ctx: Context, found: Diagnostic) -> Diagnostic:
    """Where the ranks' gradients of a tensor add up to the derivative finite differences
    measured, each rank held only its own part: the all-reduce backward needed is missing."""
    name, table = found.inputs[0], ctx.evidence.table
    summed = ctx.prepared.target.ranks_sum(name)  # type: ignore[attr-defined]
    answer = estimated(table.answers.get(name, {})) if table is not None else None
    if summed is None or answer is None:
        return found
    fd = answer.values.double().reshape(summed.shape)
    if not bool(torch.allclose(summed, fd, rtol=ctx.evidence.tol.rtol * 10,
                               atol=ctx.evidence.tol.atol * 10)):
        return found
    how = (f" The ranks' gradients of {name} add up to the derivative: each rank holds only "
           "its own part of it — a reduction (all-reduce) missing in backward, where the "
           "tensor is used by every rank (Megatron's copy-to-tensor-parallel region).")
    return replace(found, message=found.message + how,
                   hint="all-reduce the gradient in the backward of the Function that hands "
                        f"{name} to the parallel region")


def _diagnostic(d: Disagreement) -> Diagnostic:
    name, rank = d.name, d.rank
    message = (f"{name}'s gradient on rank {rank} differs from rank {d.against}'s at "
               f"{d.elements} element(s), by up to {d.apart:.6g} (largest |gradient| on rank "
               f"{d.against}: "
               f"{d.scale:.6g}){_factor(d)}; a replicated tensor gets the same gradient on every "
               "rank.")
    hint = ("a backward collective that runs on some ranks only, a rank-dependent scale, or a "
            "gradient reduced over a different group: each rank steps differently and the "
            "replicas drift apart")
    return Diagnostic("ranks_disagree", "", f"rank {rank}", [name], d.elements, message, hint)


FEATURE = RankAgreement()
