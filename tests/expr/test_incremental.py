"""Column-wise finite differences (expr.columns) against the general vmap batches: the same
columns and kinks, at a fraction of the work, for every expression it accepts."""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gradscope
from gradscope.engines.fd import FiniteDifferences
from gradscope.engines.fd.policy import DEFAULT_EPS
from gradscope.targets import resolve
from tests.strategies import smooth

_KINKY = ["abs({})", "relu({} - 0.3)", "clamp({}, -0.5, 0.5)", "maximum({}, 0.2)"]
_OUTER = ["sum({})", "mean({}) * sum(cos({}))", "sum({}, -1)", "mean({}, 0) + 1",
          "sum(({})**2) / (1 + mean({}))", "max(sum({}, -1))", "abs(sum({}))",
          "norm(sum({}, 0))", "sum({}) * y", "logsumexp({})", "norm({}) + mean({})",
          "logsumexp({}, -1) * 2", "norm({}, dim=0)", "max({})", "min({}, -1) * 2",
          "max(abs({}), 0)", "sum(min(relu({}), -1))"]


def _fd(target, values, columns: bool):
    around = target.traced_around
    if not columns:
        def around(base):  # the same target, without its column evaluator
            out, branches, moving, _ = target.traced_around(base)
            return out, branches, moving, lambda name: None
    return FiniteDifferences(target.traced, values, eps=DEFAULT_EPS,
                             elementwise=target.elementwise_inputs,
                             around=around)


@st.composite
def dense_expression(draw):
    inner = draw(smooth(depth=2))
    if draw(st.booleans()):
        inner = draw(st.sampled_from(_KINKY)).format(inner)
    outer = draw(st.sampled_from(_OUTER))
    return outer.format(*([inner] * outer.count("{}")))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=dense_expression(), seed=st.integers(0, 1000),
       shape=st.sampled_from([(5,), (3, 4), (2, 3, 2)]))
def test_columns_match_the_vmap_batches(expr, seed, shape):
    try:
        target = resolve(expr)
    except gradscope.errors.UsageError:  # the grammar drew no input at all
        return
    gen = torch.Generator().manual_seed(seed)
    values = {n: torch.randn(shape, generator=gen, dtype=torch.float64) for n in target.names}
    if "y" in values:
        values["y"] = values["y"].reshape(-1)[:1].reshape(())
    fast, slow = _fd(target, values, True), _fd(target, values, False)
    for name in target.names:
        if name in target.elementwise_inputs:
            continue
        a, b = fast.estimate(name), slow.estimate(name)
        assert torch.equal(a.kink, b.kink), expr
        scale = 1.0 + float(b.partial.abs().nan_to_num(0.0).max())
        assert torch.allclose(a.partial, b.partial, rtol=1e-6, atol=1e-8 * scale,
                              equal_nan=True), expr


def test_supported_shapes_of_expression_use_columns_and_others_fall_back():
    x = {"x": torch.linspace(-1, 1, 50, dtype=torch.float64).reshape(5, 10)}
    for expr, used in [("sum(sin(x)**2) * mean(cos(x))", True), ("mean(x**2, 1)", True),
                       ("mean(sum(x, 0)**2)", True), ("abs(sum(x)) + mean(x)", True),
                       ("logsumexp(x) + norm(x)", True), ("sum(norm(x, dim=1))", True),
                       ("max(sum(x, 1))", True), ("max(x) - min(abs(x)) + sum(max(x, 0))", True),
                       ("sum(x - mean(x))", False), ("softmax(x)", False),
                       ("sum(softmax(x, 0))", False)]:
        fd = _fd(resolve(expr), x, True)
        fd.estimate("x")
        assert (fd.batcher.column_fn["x"] is not None) == used, expr


def test_dense_check_uses_linear_work_and_agrees():
    # 20,000 columns of a 20,000-element loss: vmap batches would evaluate 4e8 elements
    report = gradscope.check("sum(sin(x)**2) * mean(cos(x))", x="randn(20000)")
    (x,) = report.inputs
    assert report.passed and x.finite_difference_mode == "dense"
    assert x.status_counts == {"ok": 20000}


def test_an_evaluator_failure_mid_way_falls_back_to_vmap_batches(monkeypatch):
    from gradscope.expr.incremental import IncrementalColumns

    # 3,000 columns: one batch for the column evaluator, many for perturbed copies
    target = resolve("sum(sin(x)**2) * mean(cos(x))")
    x = {"x": torch.linspace(-1, 1, 3000, dtype=torch.float64)}
    want = _fd(target, x, False).estimate("x").partial
    calls = []
    original = IncrementalColumns.__call__

    def flaky(self, pos, delta):
        calls.append(len(pos))
        if len(calls) > 1:  # the one-column trial passes, the real batch fails
            raise RuntimeError("unforeseen")
        return original(self, pos, delta)

    monkeypatch.setattr(IncrementalColumns, "__call__", flaky)
    fd = _fd(target, x, True)
    col = fd.estimate("x")
    assert calls[:2] == [1, 6000] and fd.batcher.column_fn["x"] is None
    assert torch.allclose(col.partial, want, rtol=1e-9, atol=1e-12)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=dense_expression(), seed=st.integers(0, 1000))
def test_checks_of_dense_expressions_never_report_a_false_mismatch(expr, seed):
    try:
        report = gradscope.check(expr, seed=seed, shape=(3, 4))
    except gradscope.errors.UsageError as exc:  # no input, or a reduction that breaks shapes
        assert "has no inputs" in str(exc) or "cannot compute" in str(exc)
        return
    assert all(i.status_counts.get("mismatch", 0) == 0 for i in report.inputs), report.to_text()


def test_ties_of_max_and_min_follow_torch_first_occurrence():
    for expr, values in [("max(x)", [1.0, 3.0, 3.0, 2.0]), ("max(relu(x))", [-1.0, -0.5, -2.0]),
                         ("min(x, 0) * 1", [[2.0, 1.0], [2.0, 5.0], [0.5, 1.0]]),
                         ("max(x, -1) * 1", [[4.0, 4.0, 1.0], [0.0, 7.0, 7.0]])]:
        target = resolve(expr)
        x = {"x": torch.tensor(values, dtype=torch.float64)}
        fast, slow = _fd(target, x, True), _fd(target, x, False)
        a, b = fast.estimate("x"), slow.estimate("x")
        assert fast.batcher.column_fn["x"] is not None, expr
        assert torch.equal(a.kink, b.kink), expr
        assert torch.allclose(a.partial, b.partial, atol=1e-9, equal_nan=True), expr
