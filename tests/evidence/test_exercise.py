"""Drawn inputs are narrowed where the user's code is flat at most of them (sparsemax one-hot
at ±6.37), so a bug in the backward's arithmetic shows; given values, expressions and code that
moves (or moves no more when narrowed) keep the default spread."""

from __future__ import annotations

import torch

import gradscope
from gradscope.inputs.text import SPREAD, parse_value, respread
from tests.paths import DATA

SAT = f"{DATA}/saturating.py"


def test_a_doubled_sparsemax_backward_fails_where_one_hot_rows_hid_it():
    report = gradscope.check(f"{SAT}:sparsemax_doubled", shape={"z": (4, 6)})
    assert not report.passed, report.to_text()
    described = report.inputs[0].described
    assert "narrowed" in described and f"at ±{SPREAD:g}" in described


def test_a_correct_sparsemax_passes_at_the_narrowed_points():
    report = gradscope.check(f"{SAT}:sparsemax", shape={"z": (4, 6)})
    assert report.passed, report.to_text()
    assert "over ±0.37" in report.inputs[0].described


def test_given_values_are_never_narrowed():
    report = gradscope.check(f"{SAT}:sparsemax_doubled", at={"z": "spread(4,6)"})
    assert "narrowed" not in report.inputs[0].described


def test_code_that_moves_keeps_the_default_spread():
    report = gradscope.check(f"{SAT}:relu6_leak")  # its bug lies past 6: the spread reaches it
    assert "narrowed" not in report.inputs[0].described
    assert not report.passed


def test_a_step_flat_at_every_spread_is_not_narrowed():
    report = gradscope.check(f"{SAT}:hard_threshold")
    assert "narrowed" not in report.inputs[0].described


def test_expressions_are_not_narrowed():
    report = gradscope.check("clamp(x, -0.1, 0.1)")
    assert "narrowed" not in report.inputs[0].described


def test_respread_keeps_the_order_and_says_the_new_spread():
    wide = parse_value("spread(3,5)", "x", seed=4, name="z")
    narrow = respread(wide, 0.37)
    assert torch.equal(wide.tensor.argsort(), narrow.tensor.argsort())
    assert torch.allclose(narrow.tensor * (SPREAD / 0.37), wide.tensor)
    assert "over ±0.37" in narrow.brief and "±6.37" not in narrow.brief
    assert narrow.tensor.abs().max().item() == 0.37


def test_a_narrowed_draw_is_added_never_substituted_a_bug_past_six_still_fails():
    wrong = gradscope.check(f"{SAT}:ClippedOuter", shape={"x": (40,)})
    assert not wrong.passed, wrong.to_text()
    # the report is the default draw's, which found it, and says so
    assert "narrowed" not in wrong.inputs[0].described
    assert f"over ±{SPREAD:g}" in wrong.inputs[0].described
    assert any("default draw's, which found the failure" in n for n in wrong.notes)


def test_the_right_twin_passes_both_draws_and_the_report_says_so():
    right = gradscope.check(f"{SAT}:ClippedOuterRight", shape={"x": (40,)})
    assert right.passed, right.to_text()
    assert "narrowed" in right.inputs[0].described
    assert any("also ran at the default draw" in n and "passed there" in n
               for n in right.notes)
