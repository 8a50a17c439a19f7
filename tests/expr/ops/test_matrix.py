"""torch.linalg beyond det and inverse: solves, norms, powers and pseudo-inverses written with
other rows or closed-form adjoints. Every row an expression can call appears in an everyday
line, and the lines written for this family check out — the three engines agree in float64
and float32, and the symbolic VJP matches torch.func.vjp."""

from __future__ import annotations

import pytest
import torch

import gradscope
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


@pytest.mark.parametrize("text", ["svdvals(a)", "torch.linalg.eigvalsh(a)"])
def test_repeated_values_are_kinks_in_every_view_and_only_there(text):
    # the identity's values tie: neither has a derivative (a step either way picks other
    # vectors), like sort's ties — nondifferentiable, never a "full Jacobian" mismatch
    tied = gradscope.check(text, a="[[1,0,0],[0,1,0],[0,0,2]]")
    assert tied.passed, tied.to_text()
    statuses = tied.inputs[0].element_status
    assert statuses[2] == ["ok", "ok", "ok"] and statuses[0][0] == "nondifferentiable"
    assert all(c.passed for c in tied.upstream_checks)
    apart = gradscope.check(text, a="[[1,0.2,0],[0.2,1.5,0],[0,0,2]]")  # (values apart)
    assert apart.passed and set(apart.inputs[0].status_counts) == {"ok"}
