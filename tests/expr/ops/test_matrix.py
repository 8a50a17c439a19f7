"""torch.linalg beyond det and inverse: solves, norms, powers and pseudo-inverses written with
other rows or closed-form adjoints. Every row an expression can call appears in an everyday
line, and the lines written for this family check out — the three engines agree in float64
and float32, and the symbolic VJP matches torch.func.vjp."""

from __future__ import annotations

import pytest
import torch

from gradscope.engines.symbolic import SymbolicEngine
from gradscope.errors import UsageError
from gradscope.expr.ops import matrix
from gradscope.expr.parse import parse
from tests.expr.ops import family_tests

(test_every_row_is_exercised, test_engines_agree_in_float64_and_float32,
 test_symbolic_vjp_matches_torch_func_vjp) = family_tests(matrix)


def test_the_exponential_adjoint_is_the_block_exponential():
    # for a diagonal A, d exp(A)/dA_ii = exp(A_ii) and the off-diagonal pairs mix by
    # (e^a - e^b) / (a - b)
    a = torch.diag(torch.tensor([0.0, 1.0], dtype=torch.float64))
    engine = SymbolicEngine(parse("torch.linalg.matrix_exp(x)"), {"x": a})
    g = torch.tensor([[1.0, 1.0], [0.0, 0.0]], dtype=torch.float64)
    grad = engine.vjp(g)["x"]
    assert torch.allclose(grad, torch.tensor([[1.0, torch.e - 1], [0.0, 0.0]],
                                             dtype=torch.float64))


def test_matrix_powers_are_bounded():
    with pytest.raises(UsageError, match="exponent is at most"):
        SymbolicEngine(parse("torch.linalg.matrix_power(x, 100)"),
                       {"x": torch.eye(2, dtype=torch.float64)})
