"""Columns that share evaluations. When the runner hands in a *claimed* sparsity pattern of an
input's Jacobian (where autograd's Jacobian is nonzero), columns are grouped so that no two
columns of a group are claimed nonzero in the same output element (a greedy colouring, as
Curtis, Powell and Reid compress sparse Jacobians), and one two-point difference along a
weighted sum of a group's columns gives every column of the group: output element r of the
group's difference is w_c·h_c·J[r, c] for the one column c claimed there. A `ctc_loss` over a
batch of 16 (each loss moves with its own sample only) needs 1,000 such differences instead of
16,000.

The claim comes from the code under test, so it is verified, never trusted. Each column gets a
seeded random weight (±[1, 2)), and an entry the claim calls zero is still inside its group's
difference at its output element:
* where no column of the group is claimed there, a difference beyond its round-off bound is
  unexplained: the group's columns are differenced one by one;
* where another column c is claimed there, the entry enters c's estimate scaled by a random
  ratio of weights, so c disagrees with autograd (a gradient written into the wrong column is
  missed only if two weights agree within the tolerance: about rtol per element), and a
  doubted column has its whole group refined column by column (columns.py), which places the
  error where it is.
A group whose stencil changed a branch (a kink) or that the target rejected is differenced
column by column as well. A doubted group is refined as a group first: four-point differences
along its weights and along a second, independent draw of weights; where the two agree within
their error bounds no claimed-zero entry is inside (it would move the two by different ratios),
and the extrapolated values stand — a constant factor in a batched op costs eight evaluations
per group, not four per column. Where they disagree, the group's columns are taken one by one.
The claim decides how evaluations are shared, never a value compared.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gradscope.engines.fd.batcher import Batcher, out_of_memory
from gradscope.engines.fd.point import Point
from gradscope.errors import TargetError
from gradscope.rng import generator

MAX_GROUP = 256  # columns per group: the weights of a group stay well apart
MAX_SCAN = 64  # groups tried per column before it opens a new one (bounds the colouring)
WORTH = 0.5  # group only when it needs at most this fraction of the evaluations
MIN_COLUMNS = 16  # below this, grouping saves nothing worth its setup
MAX_ENTRIES = 1 << 26  # claimed patterns larger than this are not asked for (64 MB)


@dataclass(frozen=True)
class Grouped:
    """Two-point estimates of the grouped columns of one input: `partial` and `error` are
    (n_out, n_in), valid where `groups` ≥ 0; −1 marks a column left to be differenced on its
    own (its group had a kink, a rejection or an unexplained difference)."""

    partial: torch.Tensor
    error: torch.Tensor
    groups: torch.Tensor  # (n_in,) long
    forward_calls: int


def worth_asking(n_out: int, n_in: int) -> bool:
    """Whether a claimed pattern could pay for itself: it costs n_out backward passes, and
    grouping saves at most n_in − (largest row count) column evaluations."""
    return 1 < n_out <= n_in and n_in >= MIN_COLUMNS and n_out * n_in <= MAX_ENTRIES


def colouring(pattern: torch.Tensor) -> torch.Tensor | None:
    """(n_in,) group of each column of a boolean (n_out, n_in) pattern, no two columns of a
    group true in the same row; None when grouping would not halve the evaluations."""
    n_in = pattern.shape[1]
    if n_in < MIN_COLUMNS:
        return None
    kinds, inverse = torch.unique(pattern.t(), dim=0, return_inverse=True)
    masks = [int.from_bytes(_packed(row), "little") for row in kinds]
    used: list[int] = []  # rows taken in each group
    size: list[int] = []
    start = [0] * len(masks)  # columns of one kind resume where the last one found room
    out = [0] * n_in
    open_from = 0  # every group before it is full
    for column, kind in enumerate(inverse.tolist()):
        while open_from < len(size) and size[open_from] >= MAX_GROUP:
            open_from += 1
        mask, k = masks[kind], max(start[kind], open_from)
        for _ in range(MAX_SCAN):
            if k >= len(used) or not (used[k] & mask or size[k] >= MAX_GROUP):
                break
            k += 1
        else:
            k = len(used)
        if k >= len(used):
            used.append(0)
            size.append(0)
            if len(used) > WORTH * n_in:
                return None
        used[k] |= mask
        size[k] += 1
        out[column] = k
        start[kind] = k if mask == 0 else k + 1
    return torch.tensor(out, dtype=torch.long, device=pattern.device)


def _packed(row: torch.Tensor) -> bytes:
    bits = torch.nn.functional.pad(row.to(torch.uint8).cpu(), (0, -row.numel() % 8))
    weights = torch.tensor([1, 2, 4, 8, 16, 32, 64, 128], dtype=torch.uint8)
    return bytes((bits.reshape(-1, 8) * weights).sum(1).to(torch.uint8).tolist())


def grouped(point: Point, batcher: Batcher, name: str, pattern: torch.Tensor,
            groups: torch.Tensor, which: torch.Tensor | None = None, points: int = 2,
            weighting: str = "") -> Grouped:
    """The groups `which` (all: None) differenced along their weighted columns at `points`
    stencil points (module doc); `weighting` names another seeded draw of the weights."""
    x = point.values[name]
    n_in, n_out = x.numel(), pattern.shape[0]
    claimed = pattern.to(x.device)
    scaled = _weights(name, n_in, weighting).to(point.dtype).to(x.device) \
        * point.step(name).reshape(-1)
    partial = torch.zeros(n_out, n_in, dtype=point.dtype, device=x.device)
    error = torch.zeros_like(partial)
    alone = torch.zeros(n_in, dtype=torch.bool, device=x.device)
    count = int(groups.max()) + 1
    todo = torch.arange(count, device=x.device) if which is None else which
    slot_of = torch.full((count,), -1, dtype=torch.long, device=x.device)
    size = batcher.chunk_size(name, n_in, n_out)
    calls = 0
    for first in range(0, todo.numel(), size):
        chunk = todo[first:first + size]
        k = chunk.numel()
        slot_of[chunk] = torch.arange(k, device=x.device)
        members = torch.nonzero(torch.isin(groups, chunk)).reshape(-1)
        slot = slot_of[groups[members]]
        dirs = torch.zeros(k, n_in, dtype=point.dtype, device=x.device)
        dirs[slot, members] = scaled[members]
        calls += points * k
        try:
            est, err, kinks, _ = batcher.along(name, x, dirs, points)
        except (TargetError, RuntimeError, MemoryError) as exc:
            if not isinstance(exc, TargetError) and not out_of_memory(exc):
                raise
            alone[members] = True  # column by column, where rejections are found one by one
            continue
        mine = claimed[:, members]
        covered = torch.zeros(n_out, k, dtype=torch.float32, device=x.device)
        covered.index_add_(1, slot, mine.to(torch.float32))
        # (an output element no column is claimed at must not move beyond its error bound)
        doubtful = ((est.abs() > err) & (covered == 0)).any(0) | ~torch.isfinite(est).all(0)
        for changed in kinks.values():
            doubtful |= changed
        partial[:, members] = torch.where(mine, est[:, slot] / scaled[members], 0.0)
        error[:, members] = err[:, slot] / scaled[members].abs()
        alone[members] |= doubtful[slot]
    return Grouped(partial, error, torch.where(alone, -1, groups), calls)


def _weights(name: str, n: int, weighting: str) -> torch.Tensor:
    """±[1, 2), seeded per input and weighting."""
    size = torch.rand(n, generator=generator(0, f":groups{weighting}:{name}"),
                      dtype=torch.float64)
    signs = torch.randint(0, 2, (n,), generator=generator(0, f":signs{weighting}:{name}"))
    return (1 + size) * (signs * 2 - 1)


def agreeing(first: Grouped, second: Grouped, groups: torch.Tensor, which: torch.Tensor
             ) -> torch.Tensor:
    """(n_in,) the columns of the groups `which` whose two weightings agree within their
    error bounds everywhere in the group: no entry the claim calls zero moved them (a
    contaminated column moves by a different ratio of weights in each)."""
    inside = torch.isin(groups, which)
    cols = torch.nonzero(inside).reshape(-1)
    apart = (first.partial[:, cols] - second.partial[:, cols]).abs() \
        > first.error[:, cols] + second.error[:, cols]
    bad = apart.any(0) | (first.groups[cols] < 0) | (second.groups[cols] < 0)
    spoiled = groups[cols][bad].unique()
    ok = inside.clone()
    ok[cols] = ~torch.isin(groups[cols], spoiled)
    return ok
