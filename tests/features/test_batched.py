"""A batched evaluation decides only after it agreed with a plain call: a Function whose own
vmap rule computes twice forward no longer hides a backward twice too large, a right backward
beside a wrong vmap rule passes with the rule named (a warning, not a wrong backward), and a
right rule says nothing."""

from __future__ import annotations

import torch

import gradscope
from gradscope.engines.autograd import AutogradEngine
from tests.paths import DATA

RULES = f"{DATA}/batch_rules.py"


def _batched(report):
    return [d for d in report.diagnostics if d.kind == "batched_differs"]


def test_a_wrong_backward_agreeing_with_a_wrong_vmap_rule_fails():
    report = gradscope.check(f"{RULES}:wrong_both_rows", shape={"x": (4, 6)})
    assert not report.passed
    assert "2 × the derivative" in report.to_text()
    (said,) = _batched(report)
    assert "SquareWrongBoth.vmap (batch_rules.py:" in said.message


def test_a_right_backward_beside_a_wrong_vmap_rule_passes_with_the_rule_named():
    report = gradscope.check(f"{RULES}:wrong_rule_rows", shape={"x": (4, 6)})
    assert report.passed, report.to_text()
    (said,) = _batched(report)
    assert "SquareWrongRule.vmap" in said.message and "disagreed with a plain call" in said.message
    strict = gradscope.check(f"{RULES}:wrong_rule_rows", shape={"x": (4, 6)},
                             fail_on="warning")
    assert not strict.passed


def test_a_right_vmap_rule_says_nothing():
    report = gradscope.check(f"{RULES}:square_rows", shape={"x": (4, 6)})
    assert report.passed and not _batched(report)


def test_autograds_batched_backward_is_proven_against_a_plain_one():
    x = torch.randn(3, 4, dtype=torch.float64)
    engine = AutogradEngine(lambda v: v["x"].sin().sum(-1), {"x": x})
    rows = engine.jacobian()["x"]
    assert engine.rows_proven and engine.batched_apart is None
    assert torch.allclose(rows.reshape(3, 3, 4).sum(0), x.cos())
