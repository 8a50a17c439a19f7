"""Random projections over every element of a sampled input: vᵀJt by finite differences
along seeded random directions t, against (Jᵀv)·t from autograd — an element the sample missed
still shows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from gradscope.engines.fd.batcher import rejection
from gradscope.engines.fd.result import Directional
from gradscope.errors import TargetError
from gradscope.rng import generator
from gradscope.runner.prepare import Prepared
from gradscope.runner.references import PROJECTIONS

if TYPE_CHECKING:
    from gradscope.runner.evidence import Evidence


@dataclass(frozen=True)
class Projection:
    """vᵀJt by finite differences along a random direction t over every element of a sampled
    input, against (Jᵀv)·t from autograd, and the slack the difference is allowed."""

    name: str
    index: int
    elements: int
    difference: float
    slack: float
    kinked: bool
    rejected: str = ""  # what the target raised along the direction (then nothing compared)


def projected(prepared: Prepared, evidence: Evidence) -> tuple[Projection, ...]:
    """For a sampled input: vᵀJt from finite differences along random directions t over all
    its elements, against (Jᵀv)·t from autograd — an element the sample missed still shows."""
    finite, back, tol = evidence.finite, evidence.backward, evidence.tol
    if finite is None or finite.fd is None or back.grads is None:
        return ()
    v = back.upstream.to(torch.float64)
    out = []
    for name in prepared.target.names:
        est = finite.estimates.get(name)
        if est is None or est.sampled is None:
            continue
        x = finite.fd.values[name]
        g = back.grads[name].to(torch.float64)
        for k in range(PROJECTIONS):
            gen = generator(prepared.options.seed, f":proj:{name}:{k}")
            t = torch.randn(x.shape, generator=gen, dtype=torch.float64).to(x.device)
            try:
                d = finite.fd.directional({name: t})
            except TargetError as exc:  # the target rejects points along t: not run
                out.append(Projection(name, k, t.numel(), float("nan"), 0.0, False,
                                      rejection(exc)))
                continue
            gt = torch.mul(g, t)
            dot = float(gt.sum())
            difference, slack = judged(d, v, dot, float(gt.abs_().sum()), tol.atol, tol.rtol)
            out.append(Projection(name, k, t.numel(), difference, slack, bool(d.kink.any())))
    return tuple(out)


def judged(d: Directional, v: torch.Tensor, dot: float, spread: float, atol: float,
           rtol: float) -> tuple[float, float]:
    """A projection's difference |vᵀ(J·t) − (Jᵀv)·t| (`dot`: autograd's side) and the slack it
    is allowed: the tolerance on Σ|g·t| (`spread`; |g|·|t| = |g·t|) plus three times the
    estimate's own error bound (≥ 0: one temporary, not three)."""
    slack = atol + rtol * spread + 3 * float(torch.mul(v, d.error).abs_().sum())
    return abs(float((v * d.value).sum()) - dot), slack
