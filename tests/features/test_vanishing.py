"""Vanishing ops: inputs below one confirmed by probing, ok zeros relabelled `vanishing` only
below a known piecewise-constant op, never a mismatch relabelled."""

from __future__ import annotations

import gradscope
from gradscope.evidence.gather import gather
from gradscope.evidence.prepare import prepare
from gradscope.options import Options, Request
from gradscope.runner.excuses import excuse
from tests.paths import DATA


def _facts(target: str, **options):
    prepared = prepare(Request("jvp", target, Options(**options)))
    return excuse(prepared, gather(prepared)).facts.get("vanishing")


def test_inputs_below_a_vanishing_op():
    found = _facts("sum(round(x) * w)", at={"x": "0.2,1.7", "w": "1,2"})
    assert found.vanishing == {"x"} and found.confirmed == {"x"}
    report = gradscope.jvp("sum(round(x) * w)", x="0.2,1.7", w="1,2")
    assert report.passed and [i.status for i in report.inputs] == ["vanishing", "ok"]


def test_a_straight_through_estimator_is_no_vanishing_op():
    found = _facts(f"{DATA}/corpus.py:RoundSTE", at={"x": "0.2,1.7"})
    assert found is None or "x" not in found.vanishing


def test_a_wrong_gradient_below_a_vanishing_op_stays_a_mismatch():
    # round's zero times a factor the backward gets wrong: only ok zeros are relabelled
    report = gradscope.jvp(f"{DATA}/corpus.py:SignFlip", x="0.2,1.7")
    assert not report.passed and report.inputs[0].status == "mismatch"
