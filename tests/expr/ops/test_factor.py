"""The Cholesky factor and pdist with closed-form adjoints. Every row an expression can call
appears in an everyday line, and the lines written for this family check out — the three
engines agree in float64 and float32, and the symbolic VJP matches torch.func.vjp."""

from __future__ import annotations

import torch

from gradscope.engines.symbolic import SymbolicEngine
from gradscope.expr.ops import factor
from gradscope.expr.parse import parse
from tests.expr.ops import family_tests

(test_every_row_is_exercised, test_engines_agree_in_float64_and_float32,
 test_symbolic_vjp_matches_torch_func_vjp) = family_tests(factor)


def test_pdist_sends_each_pairs_gradient_to_its_two_rows():
    x = torch.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]], dtype=torch.float64)
    engine = SymbolicEngine(parse("F.pdist(x)"), {"x": x})
    grad = engine.vjp(torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64))["x"]
    assert torch.allclose(grad, torch.tensor([[-0.6, -0.8], [0.6, 0.8], [0.0, 0.0]],
                                             dtype=torch.float64))
