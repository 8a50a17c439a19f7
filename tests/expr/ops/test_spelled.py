"""Other spellings of rows (identities of real tensors, `_copy` views, clamp_max, rsub, the
normal distribution's functions, shape spellings), differentiated symbolically through their
decompositions: every row appears in an everyday line and the three engines agree on it."""

from __future__ import annotations

from gradscope.expr.ops import spelled
from tests.expr.ops import family_tests

(test_every_row_is_exercised, test_engines_agree_in_float64_and_float32,
 test_symbolic_vjp_matches_torch_func_vjp) = family_tests(spelled)
