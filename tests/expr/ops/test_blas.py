"""Linear layers and the BLAS family, differentiated symbolically through their
decompositions: every row an expression can call appears in an everyday line, and the lines
written for this family check out — the three engines agree in float64 and float32, and the
symbolic VJP matches torch.func.vjp."""

from __future__ import annotations

from gradscope.expr.ops import blas
from tests.expr.ops import family_tests

(test_every_row_is_exercised, test_engines_agree_in_float64_and_float32,
 test_symbolic_vjp_matches_torch_func_vjp) = family_tests(blas)


def test_tensordot_contracts_the_dims_it_is_given():
    # a's dims 0, 1 meet b's 2, 0: b's dims are (a's 1, its own, a's 0)
    assert blas._tensordot_equation(3, 3, ([0, 1], [2, 0])) == "abc,bea->ce"
    assert blas._tensordot_equation(2, 2, 1) == "ab,bd->ad"
