"""The named checks behind a verdict beyond the per-element tables: seeded random upstream
vectors, the full Jacobian when small (`check`), and random projections over every element of
a sampled input. Each returns `UpstreamCheck`s that name themselves."""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch

from gradscope.inputs.text import seed_for
from gradscope.report.model import UpstreamCheck
from gradscope.report.status import MISMATCH
from gradscope.report.status import worst as status_worst
from gradscope.verdict.compare import Comparison
from gradscope.verdict.judge import Judge

JACOBIAN_CHECK_ENTRIES = 4096  # `check` also compares the full Jacobian up to this size
PROJECTIONS = 3  # random projections over every element of a sampled input
NOT_RUN = "not run"


def upstream_checks(judge: Judge) -> list[UpstreamCheck]:
    """The rest of `check`'s verdict: seeded random upstreams, and the Jacobian when small."""
    checks = []
    for k, (v, ag) in enumerate(judge.random_upstreams()):
        sym = judge.symbolic.vjp(v) if judge.symbolic else None
        cmps = {}
        for name in judge.names:
            est = judge.estimates[name]
            # Autograd's VJP for another upstream is judged against the exact symbolic one
            # where it exists; finite differences (compared per element above) add only noise.
            fd, err = est.vjp(v) if est and sym is None else (None, None)
            cmps[name] = judge.compare(name, ag[name], sym[name] if sym else None, fd, err)
        seed = seed_for(judge.seed, f":upstream{k}")
        checks.append(named(f"random upstream #{k + 1} (uniform(-1,1), seed {seed})", cmps))
    output = judge.autograd.output
    entries = output.numel() * sum(judge.autograd.leaves[n].numel() for n in judge.names)
    if entries <= JACOBIAN_CHECK_ENTRIES:
        checks.append(named("full Jacobian", judge.jacobian_comparisons()))
    return checks


def named(label: str, cmps: Mapping[str, Comparison]) -> UpstreamCheck:
    mismatches = sum(int((c.status == MISMATCH).sum()) for c in cmps.values())
    worst = max((c.max_abs_error() for c in cmps.values()), default=0.0)
    statuses = {n: _word(c) for n, c in cmps.items()}
    ran = [s for s in statuses.values() if s != NOT_RUN]
    result = status_worst(ran) if ran else NOT_RUN
    return UpstreamCheck(label, mismatches == 0, worst, mismatches, statuses, result)


def _word(cmp: Comparison) -> str:
    """An input's result in a check: its worst status, or `not run` when nothing compared."""
    return cmp.worst() if cmp.compared() else NOT_RUN


def projections(judge: Judge, upstream: torch.Tensor,
                ag_grads: Mapping[str, torch.Tensor]) -> list[UpstreamCheck]:
    """For a sampled input: vᵀJt from finite differences along random directions t over all
    its elements, against (Jᵀv)·t from autograd — an element the sample missed still shows."""
    checks = []
    v = upstream.to(torch.float64)
    for name in judge.names:
        est = judge.estimates[name]
        if est is None or est.sampled is None or judge.fd is None:
            continue
        x = judge.fd.values[name]
        for k in range(PROJECTIONS):
            gen = torch.Generator().manual_seed(seed_for(judge.seed, f":proj:{name}:{k}"))
            t = torch.randn(x.shape, generator=gen, dtype=torch.float64).to(x.device)
            checks.append(_projection(judge, name, k, v, t, ag_grads[name].to(torch.float64)))
    return checks


def _projection(judge: Judge, name: str, k: int, v: torch.Tensor, t: torch.Tensor,
                g: torch.Tensor) -> UpstreamCheck:
    d = judge.fd.directional({name: t})  # type: ignore[union-attr]
    fd_val = float((v * d.value).sum())
    ag_val = float((g * t).sum())
    # |g|·|t| = |g·t|, and the error is >= 0: one temporary each, not three (20M elements)
    slack = (judge.tol.atol + judge.tol.rtol * float(torch.mul(g, t).abs_().sum())
             + 3 * float(torch.mul(v, d.error).abs_().sum()))
    diff = abs(fd_val - ag_val)
    kinked = bool(d.kink.any())
    surrogate = name in judge.surrogates or name in judge.declared
    ok = kinked or surrogate or (diff <= slack and math.isfinite(diff))
    word = "nondifferentiable" if kinked else "surrogate" if surrogate else (
        "ok" if ok else "mismatch")
    return UpstreamCheck(
        f"random projection #{k + 1} of {name} (all {t.numel():,} elements)", ok,
        diff if math.isfinite(diff) else float("nan"), 0 if ok else 1, {name: word}, word)
