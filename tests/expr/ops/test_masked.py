"""torch.masked's reductions and normalisations with a mask as data, written as the plain row
on the elements the mask keeps. Every row an expression can call appears in an everyday line,
and the lines written for this family check out — the three engines agree in float64 and
float32, and the symbolic VJP matches torch.func.vjp."""

from __future__ import annotations

import torch

import gradscope
from gradscope.expr.ops import masked
from tests.expr.ops import family_tests

(test_every_row_is_exercised, test_engines_agree_in_float64_and_float32,
 test_symbolic_vjp_matches_torch_func_vjp) = family_tests(masked)


def test_a_masked_out_element_gets_no_gradient():
    report = gradscope.check("torch.masked.mean(x, mask=m)", at={"x": [1.0, 2.0, 3.0]},
                             const={"m": torch.tensor([True, False, True])})
    assert report.inputs[0].columns["symbolic"].values == [0.5, 0.0, 0.5]
