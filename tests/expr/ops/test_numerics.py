"""Numerical building blocks (diff, the trapezoidal rule, cov and corrcoef, renorm, inner,
sum_to_size) written with other rows. Every row an expression can call appears in an everyday
line, and the lines written for this family check out — the three engines agree in float64
and float32, and the symbolic VJP matches torch.func.vjp."""

from __future__ import annotations

from gradscope.expr.ops import numerics
from tests.expr.ops import family_tests

(test_every_row_is_exercised, test_engines_agree_in_float64_and_float32,
 test_symbolic_vjp_matches_torch_func_vjp) = family_tests(numerics)
