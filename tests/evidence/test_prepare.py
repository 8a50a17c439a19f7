"""The first stage: options validated, the target made ready (converted, switched, wrapped for
--order 2, its output picked), inputs bound — and sizes refused before anything is computed."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from gradscope.errors import EvaluationError, UsageError
from gradscope.evidence.prepare import prepare
from gradscope.options import Options, Request
from tests.paths import DATA


def _prepare(target: str, **options):
    return prepare(Request("check", target, Options(**options)))


def test_the_target_and_its_bound_inputs():
    prepared = _prepare("sin(x) * y", at={"x": "1,2"})
    assert prepared.target.names == ("x", "y") and prepared.bound.cast["x"].tolist() == [1, 2]
    assert prepared.bound.upstream.ones
    with pytest.raises(dataclasses.FrozenInstanceError):
        prepared.bound = None  # type: ignore[misc]


def test_order_two_wraps_the_target_and_makes_grad_the_inner_upstream():
    prepared = _prepare("x ** 3", at={"x": "1,2"}, grad="1,3", order=2)
    assert prepared.target.kind == "expression (order 2)"
    assert prepared.bound.upstream.ones and prepared.options.grad is None
    assert prepared.target.forward(prepared.bound.cast).tolist() == [3.0, 36.0]


def test_a_module_is_converted_and_its_output_picked():
    prepared = _prepare(f"{DATA}/models.py:two_outputs", output_index=1)
    assert prepared.target.output == 1
    assert all(p.dtype == torch.float64 for p in prepared.target.parameters.values())
    with pytest.raises(UsageError, match="both pick the output"):
        _prepare(f"{DATA}/models.py:two_outputs", output_index=1, output_key="loss")
    with pytest.raises(UsageError, match="an expression has one output"):
        _prepare("x * 2", output_index=0)


def test_intermediates_are_bounded_before_they_are_made():
    with pytest.raises(UsageError, match=r"`outer\(x, y\)` would make 4,000,000 elements"):
        _prepare("sum(outer(x, y))", shape={"x": (2000,), "y": (2000,)},
                 max_elements_total=1_000_000)


def test_the_sum_of_intermediates_is_bounded_not_only_the_largest():
    # sin nested 5 deep: each value 1,000 elements, 5,000 in all, which autograd keeps
    deep = "sin(" * 5 + "x" + ")" * 5
    with pytest.raises(UsageError, match=r"5,000 elements in all .* limited to 4,000 "
                                         r"\(4 × --max-elements-total\)"):
        _prepare(deep, shape={"x": (1000,)}, max_elements_total=1000)
    assert _prepare("sin(" * 4 + "x" + ")" * 4, shape={"x": (1000,)}, max_elements_total=1000)


def test_a_shape_error_with_default_shapes_names_them():
    with pytest.raises(EvaluationError) as info:
        _prepare("sum(sin(x) * y)", shape={"x": (50,)})
    assert "y had (25,)" in str(info.value) and "--shape y=" in str(info.value)
    assert info.value.where == "sin(x) * y"  # the same error, its data kept
