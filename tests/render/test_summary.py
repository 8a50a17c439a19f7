"""A model's summary: a row per module and per tensor, the tensors that get a table of their
own, where wrong gradients start, and notes that say the same of many tensors said once."""

from __future__ import annotations

import pytest

import gradscope
from gradscope.render.summary import consolidated, detailed, summary_rows, where_wrong
from tests.paths import DATA


@pytest.mark.slow
def test_rows_by_module_then_tensor_and_the_failing_ones_detailed():
    report = gradscope.check(f"{DATA}/stack.py:small_typo_loss", at={"x": "randn(2,4,16)"})
    rows = list(summary_rows(report))
    assert rows[0].module and rows[0].name == "" and rows[0].status == "mismatch"
    tensors = [r for r in rows if not r.module]
    assert len(tensors) == len(report.inputs)
    shown = detailed(report)
    assert 0 < len(shown) <= 3 and all(i.status == "mismatch" for i in shown)
    start = where_wrong(report)
    assert start is not None and start.plain.startswith("wrong gradients start at ")


def test_a_passing_model_details_nothing():
    report = gradscope.check(f"{DATA}/models.py:loss")
    assert report.model and detailed(report) == [] and where_wrong(report) is None


def test_notes_about_many_tensors_are_said_once():
    notes = [f"finite differences skipped for {n}: boom" for n in ("a.w", "a.b", "c.w", "d.w")]
    assert consolidated([*notes, "other"], ["a.w", "a.b", "c.w", "d.w"]) == [
        "finite differences skipped for each of a.w, a.b, c.w, … (4 tensors): boom", "other"]


def test_a_note_naming_several_tensors_keeps_each_name():
    note = "checked once (a.w is also b.w; a.b is also b.b)"
    assert consolidated([note], ["a.w", "a.b", "b.w", "b.b"]) == [note]
