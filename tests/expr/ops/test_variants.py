"""torch's other names for rows and the special functions of torch.special: every row an expression
can call appears in an everyday line, and the lines written for this family check out — the
three engines agree in float64 and float32, and the symbolic VJP matches torch.func.vjp."""

from __future__ import annotations

import pytest

import gradscope
from gradscope.errors import UsageError
from gradscope.expr.ops import variants
from tests.expr.ops import family_tests

(test_every_row_is_exercised, test_engines_agree_in_float64_and_float32,
 test_symbolic_vjp_matches_torch_func_vjp) = family_tests(variants)


def test_fmax_gives_a_tie_to_its_first_argument_as_torch_does():
    report = gradscope.check("torch.fmax(x, y)", at={"x": [1.0, 2.0], "y": [1.0, 0.0]})
    x, y = report.inputs
    assert x.columns["symbolic"].values == [1.0, 1.0]
    assert y.columns["symbolic"].values == [0.0, 0.0]
    assert x.columns["autograd"].values == [1.0, 1.0]


def test_polygammas_order_is_bounded():
    with pytest.raises(UsageError, match="order n is 0 to"):
        gradscope.check("torch.polygamma(99, x)", shape={"x": "3"})
