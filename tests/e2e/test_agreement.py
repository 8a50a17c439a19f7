"""Engine agreement (hypothesis): on random smooth expressions from the grammar, at random
inputs, symbolic and finite differences agree with autograd — no false mismatch, ever."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gradscope
from gradscope.errors import UsageError
from tests.strategies import smooth


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=smooth(), seed=st.integers(0, 10_000),
       shape=st.sampled_from([(3,), (2, 3), ()]))
def test_no_false_mismatch_on_smooth_expressions(expr, seed, shape):
    expr = f"({expr}) + 0*x + 0*y"  # every input present
    report = gradscope.check(expr, seed=seed, shape=shape)
    assert report.passed, report.to_text()
    for item in report.inputs:
        assert item.status == "ok", report.to_text()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=smooth(depth=2), seed=st.integers(0, 10_000))
def test_no_false_mismatch_in_float32(expr, seed):
    report = gradscope.check(f"({expr}) + 0*x + 0*y", seed=seed, dtype="float32")
    assert report.passed, report.to_text()


@settings(max_examples=150, deadline=None)
@given(offset=st.floats(-5e-5, 5e-5), kink=st.sampled_from(
    [("abs(x)", 0.0), ("relu(x)", 0.0), ("clamp(x, -1, 1)", 1.0), ("clamp(x, -1, 1)", -1.0),
     ("round(x)", 0.5), ("floor(x)", 2.0), ("sign(x)", 0.0), ("maximum(x, 0.25*x + 0.75)", 1.0),
     ("where(x > 0.5, x**2, x)", 0.5)]))
def test_points_near_kinks_are_never_mismatches(offset, kink):
    expr, at = kink
    report = gradscope.check(expr, x=f"{at + offset!r},{at - offset!r},{at!r}")
    (x,) = report.inputs
    assert "mismatch" not in x.element_status, report.to_text()
    assert x.element_status[2] == "nondifferentiable"
    assert report.passed


_SHAPES = st.sampled_from([((3,), (3,)), ((2, 3), (3,)), ((2, 1), (1, 3)), ((), (4,)),
                           ((2, 3, 2), (3, 1))])
_DIM_REDUCE = ["sum({}, -1)", "mean({}, 0)", "logsumexp({}, -1)", "softmax({}, 0)",
               "prod(sigmoid({}), -1)"]


@st.composite
def smooth_with_dims(draw):
    inner = draw(smooth(depth=2))
    if draw(st.booleans()):
        inner = draw(st.sampled_from(_DIM_REDUCE)).format(inner)
    return inner


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=smooth_with_dims(), seed=st.integers(0, 10_000), shapes=_SHAPES)
def test_no_false_mismatch_with_broadcasting_and_dims(expr, seed, shapes):
    sx, sy = shapes
    try:
        report = gradscope.check(f"({expr}) + 0*x + 0*y", seed=seed,
                                 shape={"x": sx, "y": sy})
    except UsageError as exc:  # a reduction over a dim made the shapes incompatible
        assert "cannot compute" in str(exc)
        return
    assert report.passed, report.to_text()
    assert all(i.status_counts.get("mismatch", 0) == 0 for i in report.inputs)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=smooth(depth=2), seed=st.integers(0, 10_000),
       dtype=st.sampled_from(["float16", "bfloat16"]))
@pytest.mark.slow
def test_no_false_mismatch_in_half_precision(expr, seed, dtype):
    report = gradscope.check(f"({expr}) + 0*x + 0*y", seed=seed, dtype=dtype)
    assert report.passed, report.to_text()
