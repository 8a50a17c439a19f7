"""Tuples torch returns, one part picked: each picked part is written as another row (a narrow, a
select, an expand, a reduction): every row an expression can call appears in an everyday line,
and the lines written for this family check out — the three engines agree in float64 and
float32, and the symbolic VJP matches torch.func.vjp."""

from __future__ import annotations

import re

import pytest
import torch

import gradscope
from gradscope.engines.symbolic import SymbolicEngine
from gradscope.errors import UsageError
from gradscope.expr.ops import parts
from gradscope.expr.parse import parse
from tests.expr.ops import family_tests

(test_every_row_is_exercised, test_engines_agree_in_float64_and_float32,
 test_symbolic_vjp_matches_torch_func_vjp) = family_tests(parts)


def test_a_part_is_picked_by_index_or_by_name():
    assert parse("torch.chunk(x, 2)[-1]").root.kwargs["_item"] == -1
    assert parse("torch.aminmax(x).max").root.kwargs["_item"] == 1
    assert parse("torch.var_mean(x, True)[0]").root.kwargs["unbiased"] is True


@pytest.mark.parametrize("text, said", [
    ("torch.chunk(x, 2)", "returns a tuple; pick the part to check with [0], [1]"),
    ("torch.chunk(x, 2)[0:1]", "pick one part with a constant index such as [0]"),
    ("torch.aminmax(x)[2]", "returns (min, max); pick one with .min or .max or [0]"),
    ("torch.aminmax(x).mean", "returns (min, max)"),
])
def test_a_tuple_without_one_part_picked_is_refused(text, said):
    with pytest.raises(UsageError, match=re.escape(said)):
        parse(text)


def test_a_part_past_the_end_is_an_evaluation_error():
    with pytest.raises(UsageError, match="cannot compute"):
        gradscope.check("torch.chunk(x, 2)[5]", shape={"x": "4"})


def test_the_symbolic_column_follows_the_part_picked():
    # a part narrowed from the wrong place would give gradient to the wrong rows
    x = torch.arange(12.0, dtype=torch.float64).reshape(6, 2)
    engine = SymbolicEngine(parse("torch.split(x, [1, 3, 2])[1]"), {"x": x})
    grad = engine.vjp(torch.ones(3, 2, dtype=torch.float64))["x"]
    assert grad[:, 0].tolist() == [0, 1, 1, 1, 0, 0]
