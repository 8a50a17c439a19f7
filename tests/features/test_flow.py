"""The gradient-flow findings, and where autograd is undefined said by value."""

from __future__ import annotations

import gradscope


def test_an_undefined_gradient_is_said_by_value():
    report = gradscope.jvp("sqrt(x)", x="0,1,4", allow_nan=True)
    (nan,) = [d for d in report.diagnostics if d.kind == "nan"]
    assert "x" in nan.message


def test_a_vanishing_op_is_a_flow_finding_with_the_inputs_it_starves():
    report = gradscope.check("sum(round(x) * w)", x="0.2,1.7", w="1,2")
    (found,) = [d for d in report.diagnostics if d.kind == "vanishing_gradient"]
    assert found.inputs == ["x"]
