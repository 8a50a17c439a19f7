"""Copies (indexing, masks, scatters, layouts, pads), adjoints read off torch's forward on tracers:
every row an expression can call appears in an everyday line, and the lines written for this
family check out — the three engines agree in float64 and float32, and the symbolic VJP matches
torch.func.vjp."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import gradscope
from gradscope.errors import UsageError
from gradscope.expr.ops import indexing
from tests.expr.ops import family_tests

(test_every_row_is_exercised, test_engines_agree_in_float64_and_float32,
 test_symbolic_vjp_matches_torch_func_vjp) = family_tests(indexing)


def test_the_tracer_adjoint_adds_back_where_each_element_went():
    x = torch.tensor([[1.0, 2.0, 3.0]], dtype=torch.float64)
    pad = lambda x: F.pad(x, (2, 1), "reflect")  # noqa: E731  [3, 2, 1, 2, 3, 2]
    out = pad(x)
    g = torch.arange(1.0, 7.0, dtype=torch.float64).reshape(1, 6)
    (grad,) = indexing.copy_vjp(pad)(g, out, [x], {})
    assert grad.tolist() == [[3.0, 2.0 + 4.0 + 6.0, 1.0 + 5.0]]


def test_a_constant_the_copy_writes_gets_no_gradient_and_no_tangent():
    x = torch.tensor([1.0, 2.0], dtype=torch.float64)
    p = {"pad": (1, 1), "mode": "constant", "value": 7.0}
    out = indexing._pad(x, **p)
    (grad,) = indexing.copy_vjp(indexing._pad)(torch.ones(4, dtype=torch.float64), out, [x], p)
    assert grad.tolist() == [1.0, 1.0]
    tangent = indexing.copy_jvp(indexing._pad)([torch.ones(2, dtype=torch.float64)], out, [x], p)
    assert tangent.tolist() == [0.0, 1.0, 1.0, 0.0]


def test_a_float_mask_is_refused_with_the_way_to_give_one():
    with pytest.raises(UsageError, match="is a mask: give it as data with --const"):
        gradscope.check("torch.where(m, x, 0)", shape={"x": "3", "m": "3"})


def test_a_mask_given_as_whole_numbers_is_a_bool_mask():
    report = gradscope.check("x.masked_fill(m, 0.5)", at={"x": [1.0, 2.0, 3.0]},
                             const={"m": [1, 0, 1]})
    assert report.passed
    assert report.inputs[0].columns["autograd"].values == [0.0, 1.0, 0.0]


def test_torchs_wrong_as_strided_scatter_gradient_is_caught():
    # torch 2.13 sends as_strided_scatter's input gradient to the overwritten elements (OpInfo
    # expects its gradcheck to fail); gradscope passes exactly when torch gets it right
    x = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    torch.as_strided_scatter(x, torch.zeros(3, dtype=torch.float64), (3,), (2,)).sum().backward()
    right = x.grad.flatten().tolist() == [0.0, 1.0, 0.0, 1.0, 0.0, 1.0]
    report = gradscope.check("torch.as_strided_scatter(x, y, (3,), (2,))",
                             shape={"x": "2,3", "y": "3"})
    assert report.passed == right
    symbolic = report.inputs[0].columns["symbolic"].values
    assert symbolic == [[0.0, 1.0, 0.0], [1.0, 0.0, 1.0]]
