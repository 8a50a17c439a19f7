"""Engine results (tensors) → Report pieces (plain lists), trimming large tensors to their worst
elements: the only place that turns tensors into the report's plain values."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import torch

from gradscope.report.model import TensorSummary
from gradscope.report.status import ELEMENT
from gradscope.tensors import broadcast, first_true, multi_index


class Judged(Protocol):
    """A per-element verdict (verdict.compare.Comparison): status codes and errors."""

    status: torch.Tensor
    error: torch.Tensor

    def counts(self) -> dict[str, int]: ...


AUTOGRAD = "autograd"  # the engine being checked: its column comes first
WORST_ELEMENTS = 50  # how many elements a trimmed tensor reports
TABLE_ROWS = 24  # a table of a tensor with more reported elements shows its worst rows only
WORST_ROWS = 12
HEAD_ELEMENTS = 20  # how many leading values a trimmed output/upstream shows
MAX_INDICES = 20  # indices listed per input in one diagnostic


def flat(values: Any) -> list:
    """Nested lists (or one value, or None: nothing) as one flat list."""
    if values is None:
        return []
    if not isinstance(values, list):
        return [values]
    out: list = []
    stack = [values]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(reversed(item))
        else:
            out.append(item)
    return out


def plain(t: torch.Tensor | None) -> Any:
    """A tensor as nested lists of floats (a 0-d tensor as a bare number)."""
    if t is None:
        return None
    return t.detach().to("cpu", torch.float64).tolist()


def summary(t: torch.Tensor, max_elements: int, full: bool) -> TensorSummary:
    if full or t.numel() <= max_elements:
        return TensorSummary(list(t.shape), plain(t))
    return TensorSummary(list(t.shape), plain(t.reshape(-1)[:HEAD_ELEMENTS]), "head")


def worst_indices(cmp: Judged, max_elements: int, full: bool,
                  count: int = WORST_ELEMENTS) -> torch.Tensor | None:
    """Flat indices of the `count` worst elements (most severe status, then largest error),
    worst first, or None when every element is to be reported (no more than
    `max_elements`, or `full`). Status by status, from the most severe: each one's largest
    errors fill what is left of `count` (a key of rank and error in float64 would be three
    temporaries the size of the tensor: gigabytes for a model's embedding)."""
    n = cmp.status.numel()
    if full or n <= max_elements:
        return None
    err = None if broadcast(cmp.error) else cmp.error.reshape(-1)  # (None: one 0 broadcast)
    statuses = sorted((s for s in ELEMENT if s.value in cmp.counts()), key=lambda s: -s.rank)
    found: list[torch.Tensor] = []
    left = min(count, n)
    for status in statuses:
        if left <= 0:
            break
        members = None if len(statuses) == 1 else cmp.status.reshape(-1) == status.code
        picked = _largest(err, members, left, cmp.counts()[status.value], cmp.status.device)
        found.append(picked)
        left -= picked.numel()
    return torch.cat(found) if found else torch.zeros(0, dtype=torch.int64,
                                                      device=cmp.status.device)


def _largest(err: torch.Tensor | None, members: torch.Tensor | None, k: int, size: int,
             device: torch.device) -> torch.Tensor:
    """Flat indices of the k largest errors among `members` (None: every element), largest
    first; equal errors lowest index first, whatever topk chose among ties at the cut."""
    k = min(k, size)
    if err is None:  # every error 0: the first k members
        return torch.arange(k, device=device) if members is None else first_true(members, k)
    key = err.to(torch.float64)
    if members is not None:  # (errors are finite and ≥ 0: −1 ranks below every member)
        key = torch.where(members, key, -1.0)
    values, order = _topk(key, k)
    cut = values[-1]
    above = order[values > cut]
    ties = _ties(key, cut, k - above.numel())
    order = torch.cat([above, ties])
    values = key[order]
    by_index = torch.argsort(order)
    order, values = order[by_index], values[by_index]
    return order[torch.argsort(values, descending=True, stable=True)]


TOPK_BLOCK = 64


def _topk(key: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """torch.topk(key, k) of a flat tensor, through block maxima when it is large: each of the
    k largest elements lies in one of the k blocks with the largest maxima (a block holding
    one of them but ranked below k others would be beaten by k larger elements), so topk of
    n/64 maxima and then of k·64 candidates finds the same values at a fraction of the cost."""
    n = key.numel()
    if n < 64 * TOPK_BLOCK * k:
        return torch.topk(key, k)
    whole = n - n % TOPK_BLOCK
    maxima = key[:whole].reshape(-1, TOPK_BLOCK).amax(1)
    blocks = torch.topk(maxima, k).indices
    candidates = (blocks.unsqueeze(1) * TOPK_BLOCK
                  + torch.arange(TOPK_BLOCK, device=key.device)).reshape(-1)
    if whole < n:  # the ragged tail is always a candidate
        candidates = torch.cat([candidates, torch.arange(whole, n, device=key.device)])
    values, pos = torch.topk(key[candidates], k)
    return values, candidates[pos]


def _ties(key: torch.Tensor, cut: torch.Tensor, m: int) -> torch.Tensor:
    """Flat indices of the first `m` elements equal to `cut` (the smallest of the k largest).
    Each lies in a block whose maximum is at least the cut, and past `_topk`'s size there are
    few such blocks unless the cut is tied widely (every error 0): only those are read then,
    not a mask of the whole tensor."""
    n = key.numel()
    if n < 64 * TOPK_BLOCK * m:
        return first_true(key == cut, m)
    whole = n - n % TOPK_BLOCK
    blocks = torch.nonzero(key[:whole].reshape(-1, TOPK_BLOCK).amax(1) >= cut).reshape(-1)
    if blocks.numel() > 4 * m:  # a wide tie: the mask, a chunk at a time
        return first_true(key == cut, m)
    candidates = (blocks.unsqueeze(1) * TOPK_BLOCK
                  + torch.arange(TOPK_BLOCK, device=key.device)).reshape(-1)
    if whole < n:  # (ascending: the ragged tail comes after every block)
        candidates = torch.cat([candidates, torch.arange(whole, n, device=key.device)])
    return candidates[key[candidates] == cut][:m]


def pick(t: torch.Tensor | None, idx: torch.Tensor | None) -> Any:
    if t is None:
        return None
    if idx is None:
        return plain(t)
    return plain(t.reshape(-1)[idx.to(t.device)])


def statuses(cmp: Judged, idx: torch.Tensor | None) -> Any:
    codes = cmp.status if idx is None else cmp.status.reshape(-1)[idx]
    names = [ELEMENT[int(c)] for c in codes.reshape(-1).tolist()]
    if idx is not None or codes.ndim == 1:
        return names
    if codes.ndim == 0:
        return names[0]
    return _reshape(names, list(codes.shape))


def _reshape(flat: list[str], shape: list[int]) -> Any:
    if len(shape) == 1:
        return flat
    step = len(flat) // shape[0]
    return [_reshape(flat[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]


def indices_of(idx: torch.Tensor | None, shape: Sequence[int]) -> list[list[int]] | None:
    if idx is None:
        return None
    return [multi_index(int(i), tuple(shape)) for i in idx.tolist()]


def mask_indices(mask: torch.Tensor, limit: int = MAX_INDICES) -> list[list[int]]:
    flat = first_true(mask.reshape(-1), limit).tolist()
    return [multi_index(i, tuple(mask.shape)) for i in flat]


def rows(cmp: Judged | None, idx: torch.Tensor | None, count: int, full: bool) -> list[int]:
    """The rows a table shows, as positions into the `count` reported elements: all of them
    when few (or --full), else the WORST_ROWS worst — by status, then error, ties by position
    (the reported elements are worst first already when `idx` picked them)."""
    if count <= TABLE_ROWS or full:
        return list(range(count))
    if idx is not None or cmp is None:
        return list(range(WORST_ROWS))
    picked = worst_indices(cmp, WORST_ROWS, False, WORST_ROWS)
    return list(range(WORST_ROWS)) if picked is None else picked.tolist()
