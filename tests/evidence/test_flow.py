"""Gradient flow: vanishing points, saturation, NaN, source mapping, intermediates, vanishing
status — the diagnostics issue's acceptance numbers."""

from __future__ import annotations

import torch

import gradscope
from tests.paths import DATA


def _diags(report, kind):
    return [d for d in report.diagnostics if d.kind == kind]


def test_round_inside_a_sum_vanishes():
    report = gradscope.check("sum(round(x) * w)")
    (diag,) = _diags(report, "vanishing_gradient")
    assert diag.op == "round" and diag.where == "round(x)" and diag.inputs == ["x"]
    assert "x + (x.round() - x).detach()" in diag.hint
    inputs = {i.name: i for i in report.inputs}
    assert inputs["x"].status == "vanishing" and inputs["w"].status == "ok"
    assert report.passed
    assert not gradscope.check("sum(round(x) * w)", fail_on="warning").passed


def test_clamp_saturation_count_and_indices():
    report = gradscope.check("clamp(x, 0, 1)", x="-0.5,0.3,0.7,1.5")
    (diag,) = _diags(report, "saturation")
    assert diag.count == 2 and diag.indices == {"x": [[0], [3]]} and diag.op == "clamp"
    assert report.passed and report.inputs[0].status == "ok"


def test_relu_saturation():
    (diag,) = _diags(gradscope.check("relu(x)", x="-1,-2,3"), "saturation")
    assert diag.count == 2 and diag.op == "relu"


def test_sqrt_at_zero_names_sqrt():
    report = gradscope.check("sqrt(x)", x="0,1")
    nan = _diags(report, "nan")
    assert nan and nan[0].op == "sqrt" and nan[0].where == "sqrt(x)"
    assert report.inputs[0].element_status[0] == "undefined"


def test_log_of_negative_forward_nan():
    report = gradscope.check("log(x)", x="-1,1")
    assert report.inputs[0].element_status[0] == "undefined"
    nan = _diags(report, "nan")
    assert nan and nan[0].op == "log" and "forward" in nan[0].message


def test_zero_times_x_is_constant_not_vanishing():
    report = gradscope.check("0*x + y")
    assert report.inputs[0].status == "ok"
    assert not _diags(report, "vanishing_gradient")


def test_intermediates_of_sin():
    report = gradscope.vjp("sum(sin(x) * y)", x="1,2", y="3,4", grad="2", intermediates=True)
    grads = {i["where"]: i["grad"] for i in report.intermediates}
    assert grads["sin(x)"] == [6.0, 8.0]  # y · upstream
    assert grads["sin(x) * y"] == [2.0, 2.0]


def test_python_target_vanishing_point_has_file_and_line():
    report = gradscope.check(f"{DATA}/functions.py:quantise")
    (diag,) = _diags(report, "vanishing_gradient")
    assert diag.op == "round" and "functions.py:7:" in diag.where
    assert "torch.round(x * 4)" in diag.where
    assert {i.name: i.status for i in report.inputs} == {"x": "vanishing", "w": "ok"}


def test_flow_hooks_leave_no_trace():
    # The flow analysis uses its own leaves; a user's tensors are never touched.
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    gradscope.check("round(x) * x", x=x)
    assert x.grad is None


def test_a_sparse_gradient_on_the_way_is_counted_not_a_crash():
    def fn(x):  # to_sparse's backward hands a sparse gradient to the node before it
        return x.to_sparse().to_dense() * 2

    x = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
    assert gradscope.gradcheck(fn, (x,))
    assert gradscope.check(fn, x).passed
