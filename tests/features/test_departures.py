"""Torch's documented departures: excused where autograd with the departure undone agrees (the
proof), never counted as the user's surrogate, and never excusing a bug on the same row.

torch's documented departures: `Undone` turns them off without changing the forward, records
only those in effect, and leaves options that are no departure alone."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import gradscope
from gradscope.evidence.gather import gather
from gradscope.evidence.prepare import prepare
from gradscope.features import departures
from gradscope.options import Options, Request, from_values
from gradscope.runner.excuses import excuse
from tests.paths import DATA

PADDED = f"{DATA}/padded.py"
IDS = {"ids": "[0,2,3,0,5]"}


def test_a_padding_row_is_torchs_departure_with_its_proof():
    options = from_values({"shape": {"w": "6,3"}, "const": IDS})
    prepared = prepare(Request("check", f"{PADDED}:functional", options))
    facts = excuse(prepared, gather(prepared))["departures"]
    assert facts.departures and set(facts.departed) == {"w"}
    report = gradscope.check(f"{PADDED}:functional", shape={"w": "6,3"}, const=IDS)
    assert report.passed and report.inputs[0].status_counts == {"ok": 15, "surrogate": 3}
    assert not [d for d in report.diagnostics if d.kind == "surrogate_gradient"]  # (torch's)


def test_a_bug_on_a_padded_row_is_never_a_departure():
    report = gradscope.check(f"{PADDED}:ZeroRow", const=IDS)
    assert not report.passed
    assert not [d for d in report.diagnostics if d.kind == "documented_departure"]


def test_nothing_disagreed_nothing_to_undo():
    prepared = prepare(Request("check", "sin(x)", Options(at={"x": "1,2"})))
    assert "departures" not in excuse(prepared, gather(prepared))


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
