"""Order statistics: sort, topk, kthvalue, median, mode, the running extremes and quantiles, with
adjoints that scatter back to the chosen elements: every row an expression can call appears in
an everyday line, and the lines written for this family check out — the three engines agree in
float64 and float32, and the symbolic VJP matches torch.func.vjp."""

from __future__ import annotations

import pytest
import torch

import gradscope
from gradscope.engines.symbolic import SymbolicEngine
from gradscope.errors import UsageError
from gradscope.expr.ops import order
from gradscope.expr.parse import parse
from tests.expr.ops import family_tests

(test_every_row_is_exercised, test_engines_agree_in_float64_and_float32,
 test_symbolic_vjp_matches_torch_func_vjp) = family_tests(order)


def test_indices_are_refused_as_data():
    with pytest.raises(UsageError, match="not a part gradscope differentiates"):
        parse("torch.sort(x).indices")


def test_a_tie_in_sort_is_a_kink_not_a_bug():
    report = gradscope.check("torch.sort(x).values * w", at={"x": [1.0, 1.0, 3.0]},
                             const={"w": [1.0, 2.0, 3.0]})
    counts = report.inputs[0].status_counts
    assert report.passed and counts.get("mismatch", 0) == 0
    assert counts.get("nondifferentiable", 0) == 2  # the two tied elements


def test_the_adjoint_sends_each_value_back_to_the_element_chosen():
    x = torch.tensor([[3.0, 1.0, 2.0]], dtype=torch.float64)
    engine = SymbolicEngine(parse("torch.topk(x, 2).values"), {"x": x})
    grad = engine.vjp(torch.tensor([[10.0, 20.0]], dtype=torch.float64))["x"]
    assert grad.tolist() == [[10.0, 0.0, 20.0]]


def test_quantile_mixes_the_two_ranks_around_it():
    x = torch.tensor([4.0, 1.0, 3.0, 2.0], dtype=torch.float64)
    engine = SymbolicEngine(parse("torch.quantile(x, 0.5)"), {"x": x})
    assert engine.vjp(torch.tensor(1.0, dtype=torch.float64))["x"].tolist() == \
        [0.0, 0.0, 0.5, 0.5]
