"""An in-place change no version check sees (`y.data.mul_(2)` of a tensor an op saved): named
with its line where the target fails; a change of a copy, or of nothing saved, is not."""

from __future__ import annotations

import torch

import gradscope
from gradscope.features.inplace import unseen
from tests.paths import DATA

CHANGED = f"{DATA}/changed_in_place.py"


def _line(text: str) -> int:
    return next(k for k, code in enumerate((DATA / "changed_in_place.py").read_text()
                                           .splitlines(), 1) if text in code)


def test_a_saved_tensor_changed_through_data_is_the_culprit_with_its_line():
    report = gradscope.check(f"{CHANGED}:through_data", shape={"x": (4,)})
    assert not report.passed
    (culprit,) = [d for d in report.diagnostics if d.kind == "culprit"]
    assert culprit.message.startswith(
        f"`y.data.mul_(2)` (in through_data, changed_in_place.py:{_line('y.data.mul_(2)')}) "
        "changed in place through .data a tensor Sigmoid's backward saved")
    assert culprit.summary and "unseen by autograd" in culprit.summary


def test_a_tensor_changed_before_an_op_saved_it_passes_and_names_nothing():
    report = gradscope.check(f"{CHANGED}:through_data_before", shape={"x": (4,)})
    assert report.passed, report.to_text()
    assert not [d for d in report.diagnostics if d.kind == "culprit"]


def test_only_a_change_after_the_node_that_saved_the_storage_is_its():
    x = torch.randn(4, dtype=torch.float64, requires_grad=True)
    with unseen.Watch() as watch:
        y = x.sigmoid()
        y.data.mul_(2)
        before = x.detach().clone()
        before.mul_(2)  # (nothing saved lives there)
        z = before * x  # saved after its change: what mul read is what its backward reads
        out = (y + z).sum()
    found = unseen.unseen(out, watch.changes)
    assert [u.op for u in found] == ["Sigmoid"]
