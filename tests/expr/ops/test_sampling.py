"""grid_sample written out on plain tensors: every row an expression can call appears in an
everyday line, and the lines written for this family check out — the three engines agree in
float64 and float32, and the symbolic VJP matches torch.func.vjp."""

from __future__ import annotations

import torch

from gradscope.expr.ops import sampling
from tests.expr.ops import family_tests

(test_every_row_is_exercised, test_engines_agree_in_float64_and_float32,
 test_symbolic_vjp_matches_torch_func_vjp) = family_tests(sampling)


def test_reflection_folds_coordinates_back_with_a_flipped_derivative():
    pos, sign = sampling._reflect(torch.tensor([-0.5, 1.0, 5.5]), 0.0, 8.0)  # span 4
    assert pos.tolist() == [0.5, 1.0, 2.5] and sign.tolist() == [-1.0, 1.0, -1.0]
