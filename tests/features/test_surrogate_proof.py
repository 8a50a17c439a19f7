"""A flat forward excuses autograd only as the surrogate of a step, with its proof: a
coarse-scale check that ran (under an upstream that shows the surrogate) and found it
consistent. A forward with a slope between its flat stretches (sparsemax, a clamp) is no step,
and a gradient there is a mismatch."""

from __future__ import annotations

import pytest

import gradscope
from tests.paths import DATA

SAT = f"{DATA}/saturating.py"


@pytest.mark.parametrize("shape", [(4, 5), (8, 6)])
def test_a_sparsemax_summing_over_the_wrong_axis_fails_with_the_default_spread(shape):
    wrong = gradscope.check(f"{SAT}:sparsemax_wrong_axis", shape={"z": shape})
    assert not wrong.passed, wrong.to_text()
    assert not any(d.kind == "surrogate_gradient" for d in wrong.diagnostics)
    right = gradscope.check(f"{SAT}:sparsemax", shape={"z": shape})
    assert right.passed, right.to_text()


def test_at_given_one_hot_points_the_wrong_axis_is_no_surrogate_either():
    # the user's own spread is never narrowed: sparsemax is one-hot nearly everywhere there
    given = {"z": "spread(4,5)"}
    wrong = gradscope.check(f"{SAT}:sparsemax_wrong_axis", at=given)
    assert "narrowed" not in wrong.inputs[0].described
    assert not wrong.passed, wrong.to_text()
    assert not any(d.kind == "surrogate_gradient" for d in wrong.diagnostics)


def test_a_gradient_where_a_clamp_saturates_is_no_surrogate():
    report = gradscope.check(f"{SAT}:relu6_leak", at={"x": "linspace(-3,9,25)"})
    assert not report.passed
    assert report.inputs[0].status_counts.get("mismatch", 0) > 0
    assert "surrogate" not in report.inputs[0].status_counts


def test_a_step_with_a_straight_through_surrogate_is_still_excused():
    report = gradscope.check(f"{SAT}:round_ste", at={"x": "linspace(-3,3,25)"})
    assert report.passed, report.to_text()
    assert report.inputs[0].status_counts.get("surrogate", 0) > 0


def test_a_declared_form_autograd_departs_from_is_named_and_never_said_harmless():
    report = gradscope.check(f"{SAT}:sigmoid_round",
                             surrogate=("x=sigmoid(4*(x-round(x)))",))
    assert not report.passed
    said = next(d for d in report.diagnostics if d.kind == "surrogate_gradient")
    assert "25 × the intended gradient" in said.message
    assert "fails against the intended form" in said.message
    assert "--fail-on warning" not in said.hint
