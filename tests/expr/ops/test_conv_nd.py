"""conv3d and the transposed convolutions, with adjoints written with torch's forward
convolutions. Every row an expression can call appears in an everyday line, and the lines
written for this family check out — the three engines agree in float64 and float32, and the
symbolic VJP matches torch.func.vjp."""

from __future__ import annotations

import pytest
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


@pytest.mark.parametrize("n, groups", [(1, 3), (2, 2), (3, 2), (1, 1)])
def test_the_weight_adjoint_convolves_every_group_at_once(n, groups):
    from gradscope.expr.ops.conv_nd import weight_grad

    conv = (torch.nn.functional.conv1d, torch.nn.functional.conv2d,
            torch.nn.functional.conv3d)[n - 1]
    gen = torch.Generator().manual_seed(n)
    x = torch.randn(2, 2 * groups, *([6] * n), dtype=torch.float64, generator=gen)
    w = torch.randn(3 * groups, 2, *([2] * n), dtype=torch.float64, generator=gen,
                    requires_grad=True)
    y = conv(x, w, None, 2, 0, 1, groups)
    up = torch.randn(y.shape, dtype=torch.float64, generator=gen)
    y.backward(up)
    assert torch.allclose(weight_grad(x, up, [2] * n, [2] * n, [1] * n, groups), w.grad)
