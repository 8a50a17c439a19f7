"""Per-input report parts: the worst elements of large tensors, Jacobians of every size up to
the limit, forward mode."""

from __future__ import annotations

import pytest

import gradscope
from gradscope.errors import UsageError


def test_a_jacobian_larger_than_max_elements_reports_its_worst_entries():
    # 101 × 101 entries > --max-elements 10,000: once an IndexError (exit 4) picking the
    # input's values with the Jacobian's indices
    report = gradscope.jacobian("x * 2", shape=101)
    (x,) = report.inputs
    assert x.jacobian_shape == [101, 101] and x.elements_reported == "worst"
    assert x.values is None and len(x.indices) == 50 and len(x.autograd) == 50
    assert report.passed


def test_the_jacobian_limit_is_a_usage_error():
    with pytest.raises(UsageError, match="the Jacobian has 1,000,000 entries"):
        gradscope.jacobian("x * 2", shape=1000)


def test_large_inputs_report_their_worst_elements_with_indices():
    report = gradscope.check("abs(x)", x="linspace(-1,1,101)", max_elements=10)
    (x,) = report.inputs
    assert x.elements_reported == "worst" and [50] in x.indices
    assert x.element_status[x.indices.index([50])] == "nondifferentiable"


def test_forward_mode_reports_the_named_tangent_only():
    report = gradscope.jvp("x * y", x="1,2", y="3,4", tangent={"x": "1,0"})
    assert report.forward.tangent == {"x": [1.0, 0.0]}
    assert report.forward.autograd == [3.0, 0.0] and report.forward.status == "ok"


def test_a_feature_filling_a_field_the_report_lacks_steps_aside(monkeypatch):
    from gradscope import features
    from gradscope.features import Feature

    class Stray(Feature):
        name = "stray"

        def reported(self, ctx, inputs):
            return {"no_such_field": 1}

    monkeypatch.setattr(features, "FEATURES", (*features.FEATURES, Stray()))
    report = gradscope.check("x * 2", x="1,2")
    assert report.passed
    assert any(n.startswith("stray stepped aside") and "no_such_field" in n
               for n in report.notes)
