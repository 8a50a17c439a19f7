"""torch's documented departures: `Undone` turns them off without changing the forward, records
only those in effect, and leaves options that are no departure alone."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from gradscope.diagnose import departures


def _run(module_or_fn, *args):
    seen = departures.Undone()
    with seen:
        out = module_or_fn(*args)
    return out, seen.found


def test_padding_is_undone_only_where_the_ids_look_it_up():
    emb = nn.Embedding(5, 2, padding_idx=0)
    ids = torch.tensor([0, 3, 0])
    out, found = _run(emb, ids)
    assert torch.equal(out, emb(ids))  # the forward is the same
    assert [d.option for d in found] == ["padding_idx=0"]
    assert "2 position(s)" in found[0].effect
    out.sum().backward()
    assert emb.weight.grad[0].tolist() == [2.0, 2.0]  # the derivative: row 0 read twice
    _, none = _run(emb, torch.tensor([1, 3]))
    assert none == []  # padding_idx set but never looked up: nothing departs


def test_a_negative_padding_index_names_its_row():
    _, found = _run(lambda ids, w: F.embedding(ids, w, -1), torch.tensor([4]),
                    torch.randn(5, 2))
    assert [d.option for d in found] == ["padding_idx=4"]


def test_scale_grad_by_freq_is_undone_and_a_bags_padding_is_left_alone():
    emb = nn.Embedding(5, 2, scale_grad_by_freq=True)
    out, found = _run(emb, torch.tensor([1, 1]))
    out.sum().backward()
    assert [d.option for d in found] == ["scale_grad_by_freq"]
    assert emb.weight.grad[1].tolist() == [2.0, 2.0]  # not divided by the frequency
    bag = nn.EmbeddingBag(5, 2, padding_idx=0, mode="sum")
    ids = torch.tensor([[0, 2]])
    out, found = _run(bag, ids)
    assert found == [] and torch.equal(out, bag(ids))  # a bag's forward skips padding too


def test_the_diagnostic_says_which_option_and_where():
    found = [departures.Departure("padding_idx=0", "embedding", "row 0 …")]
    d = departures.diagnostic("m.py:M", found, {"emb.weight": 3, "head.weight": 0})
    assert d.kind == departures.KIND and d.inputs == ["emb.weight"] and d.count == 3
    assert "embedding(padding_idx=0)" in d.message and "3 element(s) of emb.weight" in d.message
    projected = departures.diagnostic("m.py:M", found, {}, projected=True)
    assert projected.count == 0 and "random projections" in projected.message


def test_a_function_of_a_symmetric_matrix_reads_its_triangle_when_undone():
    a = torch.tensor([[2.0, 0.5], [0.5, 1.5]], dtype=torch.float64, requires_grad=True)
    out, found = _run(lambda m: torch.linalg.eigvalsh(m, UPLO="U"), a)
    assert torch.allclose(out, torch.linalg.eigvalsh(a))  # the forward is the same
    assert [(d.op, d.option) for d in found] == [("linalg.eigvalsh", "the upper triangle")]
    (out * torch.tensor([1.0, 2.0], dtype=torch.float64)).sum().backward()
    assert a.grad[1, 0] == 0 and a.grad[0, 1] != 0  # the lower triangle is not read
    _, none = _run(lambda m: torch.linalg.pinv(m), a)
    assert none == []  # pinv reads the whole matrix unless hermitian=True
