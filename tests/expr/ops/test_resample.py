"""Resampling and the other poolings: interpolation and average pooling by each axis's matrix,
nearest modes traced, max pooling sent back to torch's picks. Every row an expression can call
appears in an everyday line, and the lines written for this family check out — the three
engines agree in float64 and float32, and the symbolic VJP matches torch.func.vjp."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from gradscope.expr.ops import resample
from tests.expr.ops import family_tests

(test_every_row_is_exercised, test_engines_agree_in_float64_and_float32,
 test_symbolic_vjp_matches_torch_func_vjp) = family_tests(resample)


def test_an_axis_matrix_is_the_op_on_an_identity():
    # linear interpolation 2 -> 3 with align_corners: the middle output is the mean
    fn = lambda x, **p: F.interpolate(x, mode="linear", align_corners=True, **p)  # noqa: E731
    matrix = resample._matrix(fn, 2, 0, 1, {"size": (3,)}, torch.float64)
    assert matrix.to_dense().tolist() == [[1.0, 0.0], [0.5, 0.5], [0.0, 1.0]]


def test_an_axis_matrix_is_probed_in_blocks_and_kept_sparse(monkeypatch):
    monkeypatch.setattr(resample, "PROBE_ELEMENTS", 7)  # blocks of 7 columns
    fn = lambda x, **p: F.avg_pool1d(x, **p)  # noqa: E731
    matrix = resample._matrix(fn, 40, 0, 1, {"kernel_size": 2}, torch.float64)
    dense = F.avg_pool1d(torch.eye(40, dtype=torch.float64).unsqueeze(1), 2)[:, 0].T
    assert matrix.is_sparse and matrix._nnz() == 40 and torch.equal(matrix.to_dense(), dense)


def test_a_divisor_override_scales_the_sum_of_each_window():
    x = torch.ones(1, 1, 2, 2, dtype=torch.float64)
    p = {"kernel_size": 2, "divisor_override": 3}
    out = F.avg_pool2d(x, 2, divisor_override=3)
    (grad,) = resample._avg_row(2).vjp(torch.ones_like(out), out, [x], p)
    assert torch.allclose(grad, torch.full_like(x, 1 / 3))
