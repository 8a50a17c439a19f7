"""`FILE.py:NAME.ATTR`: a target named by an attribute path, `F.apply` checked as `F` is (how
gradcheck tests call a Function), and a missing attribute said in one line."""

from __future__ import annotations

import pytest

import gradscope
from gradscope.errors import UsageError
from tests.data import function_shapes
from tests.paths import DATA


def test_a_functions_apply_is_checked_as_the_function_is():
    by_apply = gradscope.check(f"{DATA}/function_shapes.py:HalfGrad.apply", shape={"w": (5,)})
    by_class = gradscope.check(f"{DATA}/function_shapes.py:HalfGrad", shape={"w": (5,)})
    assert not by_apply.passed and by_apply.target == by_class.target.replace(
        "HalfGrad", "HalfGrad.apply")
    assert by_apply.inputs[0].status_counts == by_class.inputs[0].status_counts
    api = gradscope.check(function_shapes.HalfGrad.apply,
                          function_shapes.torch.randn(5, dtype=function_shapes.torch.float64))
    assert "HalfGrad.backward" in api.to_text()


def test_a_missing_attribute_is_one_line_naming_it():
    with pytest.raises(UsageError, match="`HalfGrad` has no `nope`"):
        gradscope.check(f"{DATA}/function_shapes.py:HalfGrad.nope")
