"""The autograd engine does what a user would: y.backward(v), then .grad."""

from __future__ import annotations

import pytest
import torch

from gradscope.engines.autograd import AutogradEngine
from gradscope.errors import UsageError
from gradscope.targets import resolve


def _engine(expr, **values):
    t = resolve(expr)
    return AutogradEngine(t.forward, {k: torch.tensor(v, dtype=torch.float64)
                                      for k, v in values.items()})


def test_backward_is_y_backward_v_and_does_not_accumulate():
    e = _engine("3*a + 2*b*b", a=[1.0, 2.0], b=[3.0, 4.0])
    v = torch.tensor([0.1, 1.0], dtype=torch.float64)
    first = e.backward(v)
    second = e.backward(v)  # .grad is cleared between calls
    assert first["b"].tolist() == second["b"].tolist() == pytest.approx([1.2, 16.0])


def test_unused_input_gets_zeros():
    e = _engine("a + 0*b", a=[1.0], b=[2.0])
    assert e.vjp(torch.ones(1, dtype=torch.float64))["b"].tolist() == [0.0]


def test_jacobian_rows_and_jvp():
    e = _engine("x * y", x=[1.0, 2.0], y=[3.0, 4.0])
    jac = e.jacobian()
    assert jac["x"].tolist() == [[3.0, 0.0], [0.0, 4.0]]
    assert e.jvp({"x": torch.ones(2, dtype=torch.float64)}).tolist() == [3.0, 4.0]


def test_non_differentiable_output_is_refused():
    with pytest.raises(UsageError, match="does not depend differentiably"):
        _engine("where(x > 0, 1, 2)", x=[1.0])


def test_a_zero_gradient_without_storage_reads_as_zeros():
    # torch answers sgn's backward with a zero tensor that has no storage
    e = _engine("torch.sgn(a)", a=[1.0, -2.0])
    v = torch.ones(2, dtype=torch.float64)
    assert e.backward(v)["a"].tolist() == e.vjp(v)["a"].tolist() == [0.0, 0.0]
    assert e.jacobian()["a"].tolist() == [[0.0, 0.0], [0.0, 0.0]]


def test_a_compiled_graph_gets_one_backward_each_from_a_fresh_forward():
    # AOTAutograd may donate a compiled graph's saved buffers to its one backward, and then
    # refuses retain_graph: every backward runs on a graph of its own
    compiled = torch.compile(lambda v: torch.tanh(v["x"]) * v["x"], backend="aot_eager")
    calls = []

    def forward(values):
        calls.append(1)
        return compiled(values)

    e = AutogradEngine(forward, {"x": torch.tensor([0.5, -1.0], dtype=torch.float64)})
    assert e.single_use
    v = torch.ones(2, dtype=torch.float64)
    first = e.backward(v)["x"]
    assert torch.equal(e.vjp(v)["x"], first) and torch.equal(e.fresh_vjp(v)["x"], first)
    assert len(calls) == 3
    assert not _engine("x * 2", x=[1.0]).single_use


def test_a_vjp_for_some_inputs_only_is_theirs_and_makes_no_gradient_of_the_others():
    import torch

    from gradscope.engines.autograd import AutogradEngine

    values = {"a": torch.tensor([1.0, 2.0]), "b": torch.tensor([3.0, 4.0])}
    engine = AutogradEngine(lambda v: v["a"] * v["b"] ** 2, values)
    v = torch.tensor([1.0, -1.0])
    whole = engine.vjp(v)
    some = engine.vjp(v, only=["b"])
    assert list(some) == ["b"] and torch.equal(some["b"], whole["b"])
    assert engine.vjp(v, only=[]) == {}
