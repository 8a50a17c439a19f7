"""Engine results (tensors) → Report pieces (plain lists), trimming large tensors to their worst
elements: the only place that turns tensors into the report's plain values."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import torch

from gradscope.report.model import TensorSummary
from gradscope.report.status import ELEMENT
from gradscope.tensors import first_true, multi_index


class Judged(Protocol):
    """A per-element verdict (verdict.compare.Comparison): status codes and errors."""

    status: torch.Tensor
    error: torch.Tensor

    def counts(self) -> dict[str, int]: ...


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
    `max_elements`, or `full`)."""
    n = cmp.status.numel()
    if full or n <= max_elements:
        return None
    err = cmp.error.reshape(-1).to(torch.float64)  # finite: compare zeroes undefined ones
    if len(cmp.counts()) == 1:
        key = err  # one status throughout (the usual case): the error alone ranks
    else:
        # One key: the status rank, then the error scaled into [0, 1). topk is O(n); a full
        # sort of a million elements costs more than all three engines together.
        lut = torch.tensor([float(s.rank) for s in ELEMENT], dtype=torch.float64,
                           device=err.device)
        rank = lut[cmp.status.reshape(-1).to(torch.int64)]
        top = float(err.max()) if n else 0.0
        key = rank * 2.0 + (err / (2.0 * top) if top > 0 else 0.0)
    k = min(count, n)
    values, order = _topk(key, k)
    # Equal keys: lowest index first, so the result does not depend on topk's choice among
    # ties at the cut or on its order (then two stable sorts: by index, then by key).
    cut = values[-1]
    above = order[values > cut]
    ties = first_true(key == cut, k - above.numel())
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
