"""Turning comparisons into report pieces: which elements a trimmed report shows."""

from __future__ import annotations

import torch

from gradscope.compare.elements import Comparison
from gradscope.report.build import WORST_ELEMENTS, worst_indices
from gradscope.report.status import MISMATCH, NONDIFFERENTIABLE, OK


def _cmp(status, error):
    return Comparison(torch.tensor(status, dtype=torch.int8),
                      torch.tensor(error, dtype=torch.float64))


def test_small_tensors_are_reported_whole():
    assert worst_indices(_cmp([OK] * 3, [0.0] * 3), max_elements=10, full=False) is None
    assert worst_indices(_cmp([OK] * 30, [0.0] * 30), max_elements=10, full=True) is None


def test_worst_are_ordered_by_error_even_when_errors_are_tiny():
    n = 1000
    error = [0.0] * n
    error[700], error[5], error[999] = 3e-15, 2e-15, 1e-15
    idx = worst_indices(_cmp([OK] * n, error), max_elements=10, full=False)
    assert idx.tolist()[:3] == [700, 5, 999]
    assert idx.tolist()[3:6] == [0, 1, 2]  # equal keys: lowest index first
    assert len(idx) == WORST_ELEMENTS


def test_severity_ranks_before_error():
    n = 200
    status, error = [OK] * n, [0.0] * n
    error[10] = 5.0  # a large error on an ok element ranks below any mismatch
    status[150], error[150] = MISMATCH, 1e-3
    status[40], error[40] = MISMATCH, 2e-3
    status[90] = NONDIFFERENTIABLE
    idx = worst_indices(_cmp(status, error), max_elements=10, full=False).tolist()
    assert idx[:4] == [40, 150, 90, 10]


def test_block_topk_equals_torch_topk():
    from gradscope.report.build import _topk

    gen = torch.Generator().manual_seed(1)
    for n in (100, 204_800, 1_000_003):
        key = torch.rand(n, generator=gen, dtype=torch.float64)
        key[n // 3] = 5.0  # a clear winner, and clustered large values in one block
        key[64:80] = torch.linspace(2.0, 3.0, 16, dtype=torch.float64)
        values, idx = _topk(key, 50)
        want_values, want_idx = torch.topk(key, 50)
        assert torch.equal(values, want_values)
        assert set(idx.tolist()) == set(want_idx.tolist())
        assert torch.equal(key[idx], values)


def test_ties_read_from_blocks_are_the_first_equal_elements_as_a_whole_mask_finds_them():
    from gradscope.report.build import _ties
    from gradscope.tensors import first_true

    gen = torch.Generator().manual_seed(3)
    for trial in range(120):
        n = int(torch.randint(1_000, 300_000, (1,), generator=gen))
        levels = int(torch.randint(1, 60, (1,), generator=gen))  # narrow and wide ties
        key = torch.randint(0, levels, (n,), generator=gen).double()
        if trial % 3 == 0:
            key = torch.rand(n, generator=gen, dtype=torch.float64)
        m = int(torch.randint(1, 6, (1,), generator=gen))
        cut = key[int(torch.randint(0, n, (1,), generator=gen))]
        assert torch.equal(_ties(key, cut, m), first_true(key == cut, m)), (trial, n, m)


def test_ties_at_the_cut_take_the_lowest_indices_across_chunks(monkeypatch):
    from gradscope import tensors

    monkeypatch.setattr(tensors, "MASK_CHUNK", 7)  # (ties spread over several chunks)
    n = 100
    idx = worst_indices(_cmp([OK] * n, [0.0] * n), max_elements=10, full=False, count=20)
    assert idx.tolist() == list(range(20))


def test_the_worst_are_ranked_status_first_then_error_as_one_key_ranks_them():
    from gradscope.report.status import ELEMENT

    gen = torch.Generator().manual_seed(5)
    for trial in range(20):
        n = 3000
        codes = torch.tensor([s.code for s in ELEMENT], dtype=torch.int8)
        status = codes[torch.randint(0, len(codes) - trial % 3, (n,), generator=gen)]
        error = torch.randint(0, 40, (n,), generator=gen).double() / 7  # ties at every cut
        got = worst_indices(Comparison(status, error), 100, False)
        # the one key: status rank, then error; equal keys lowest index first
        rank = torch.tensor([float(ELEMENT[int(c)].rank) for c in status])
        key = rank * 2.0 + error / (2.0 * float(error.max()))
        order = sorted(range(n), key=lambda i: (-float(key[i]), i))[:WORST_ELEMENTS]
        assert got.tolist() == order


def test_one_status_with_one_error_broadcast_reports_the_first_elements():
    status = torch.full((5000,), 0, dtype=torch.int8)
    error = torch.zeros((), dtype=torch.float64).expand(5000)  # (never a copy of itself)
    got = worst_indices(Comparison(status, error), 100, False)
    assert got.tolist() == list(range(WORST_ELEMENTS))
