"""conv3d and the transposed convolutions, with adjoints written with torch's forward
convolutions. Every row an expression can call appears in an everyday line, and the lines
written for this family check out — the three engines agree in float64 and float32, and the
symbolic VJP matches torch.func.vjp."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from gradscope.expr.ops import conv_nd
from tests.expr.ops import family_tests

(test_every_row_is_exercised, test_engines_agree_in_float64_and_float32,
 test_symbolic_vjp_matches_torch_func_vjp) = family_tests(conv_nd)


def test_the_weight_gradient_correlates_input_and_upstream():
    # a 1-D convolution with a kernel of 2: d<g, conv(x, w)>/dw_k = sum_l x[l + k] g[l]
    x = torch.tensor([[[1.0, 2.0, 3.0, 4.0]]], dtype=torch.float64)
    g = torch.tensor([[[1.0, 0.0, -1.0]]], dtype=torch.float64)
    gw = conv_nd.weight_grad(x, g, (2,), (1,), (1,), 1)
    assert gw.tolist() == [[[1.0 - 3.0, 2.0 - 4.0]]]
    assert F.conv1d(x, torch.ones(1, 1, 2, dtype=torch.float64)).shape == g.shape
