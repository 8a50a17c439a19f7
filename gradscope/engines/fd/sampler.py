"""Inputs too large for one column per element: four-point columns for a seeded sample of their
elements only (random projections over every element cover the rest: features/projections.py)."""

from __future__ import annotations

import torch

from gradscope.engines.fd.batcher import Batcher, rejection
from gradscope.engines.fd.point import Point
from gradscope.engines.fd.result import ColumnEstimate
from gradscope.engines.fd.stencil import (
    Progress,
    col_max,
    noise_dominated,
    numel,
)


def sample(point: Point, batcher: Batcher, name: str, count: int, seed: int,
           progress: Progress | None = None) -> ColumnEstimate:
    """Four-point columns for `count` elements of `name` drawn with `seed`."""
    x = point.values[name]
    n_in, n_out = x.numel(), numel(point.out_shape)
    gen = torch.Generator().manual_seed(seed)
    idx = distinct(n_in, count, gen).sort().values.to(x.device)
    h = point.step_at(name, idx)  # the sampled elements' steps only (not n_in of them)
    jac = torch.zeros(n_out, len(idx), dtype=point.dtype, device=x.device)
    err = torch.zeros_like(jac)
    kink = torch.zeros(n_in, dtype=torch.bool, device=x.device)
    by_branch: dict[int, torch.Tensor] = {}
    calls, start = 0, 0
    rejected = torch.zeros(n_in, dtype=torch.bool, device=x.device)
    raised = None
    for chunk in batcher.chunks(idx, n_in, n_out, name):
        (est, e, kinks, _), refused = batcher.tolerant(name, x, chunk,
                                                      h[start:start + len(chunk)], 4)
        rejected[chunk[refused.mask]] = True
        raised = raised or refused.error
        calls += 4 * len(chunk)
        if progress is not None:
            progress(len(chunk))
        stop = start + len(chunk)
        jac[:, start:stop], err[:, start:stop] = est, e
        for k, m in kinks.items():
            kink[chunk[m]] = True
            mask = by_branch.setdefault(k, torch.zeros(x.shape, dtype=torch.bool,
                                                       device=x.device))
            mask.view(-1)[chunk[m]] = True
        start = stop
    limit = point.unconverged * (col_max(jac, absolute=True) + 1)
    unconverged = (col_max(err) > limit) & ~kink[idx]
    noisy = None
    if bool(unconverged.any()):  # round-off (unchecked) or a kink or jump
        swamped = unconverged.clone()
        swamped[unconverged] = noise_dominated(err[:, unconverged],
                                               point.roundoff_scale().reshape(-1, 1),
                                               h[unconverged].reshape(1, -1)).all(0)
        kink[idx] |= unconverged & ~swamped
        if bool(swamped.any()):
            noisy = torch.zeros(n_in, dtype=torch.bool, device=x.device)
            noisy[idx[swamped]] = True
            noisy = (noisy & ~rejected).reshape(x.shape)
    kink &= ~rejected
    if raised is not None and bool(rejected[idx].all()):
        raise raised  # nothing sampled could be estimated
    return ColumnEstimate(name, tuple(x.shape), point.out_shape, jac, err, kink.reshape(x.shape),
                          by_branch, calls, f"{len(idx):,} of {n_in:,} elements sampled "
                          "(seeded)", None,
                          rejected.reshape(x.shape) if raised is not None else None,
                          rejection(raised) if raised is not None else "", noisy, indices=idx)


def distinct(n: int, count: int, gen: torch.Generator) -> torch.Tensor:
    """`count` distinct seeded positions in range(n). A permutation of all n costs a second at
    a 38M-element embedding for a sample of a thousand: past 4·count, positions are drawn
    and repeats skipped (in draw order, so the sample is the seed's alone)."""
    if 4 * count >= n:
        return torch.randperm(n, generator=gen)[:count]
    seen: dict[int, None] = {}
    while len(seen) < count:
        for i in torch.randint(n, (2 * count,), generator=gen).tolist():
            seen.setdefault(i)
            if len(seen) == count:
                break
    return torch.tensor(list(seen), dtype=torch.long)
