"""The Function a failing surrogate comes from is named; a right estimator, or one beside the
real culprit, is not."""

from __future__ import annotations

import gradscope
from tests.paths import DATA

STE = f"{DATA}/ste.py"


def _culprits(report):
    return [d for d in report.diagnostics if d.kind == "culprit"]


def test_a_straight_through_estimator_with_its_sign_flipped_is_named():
    report = gradscope.check(f"{STE}:quantised_flipped", shape={"x": (2, 4)})
    assert not report.passed
    (culprit,) = _culprits(report)
    assert culprit.message.startswith("RoundSTEFlipped.backward (ste.py:")
    assert "gives the surrogate gradient" in culprit.message
    assert "against the forward" in culprit.message and "x" in culprit.inputs


def test_a_right_estimator_passes_and_one_beside_the_real_culprit_is_not_named():
    right = gradscope.check(f"{STE}:quantised", shape={"x": (2, 4)})
    assert right.passed, right.to_text()
    assert not _culprits(right)
    beside = gradscope.check(f"{STE}:quantised_then_wrong", shape={"x": (2, 4)})
    assert not beside.passed
    named = [d.op for d in _culprits(beside)]
    assert named and all(op.startswith("DoubleTanh.backward") for op in named), named
