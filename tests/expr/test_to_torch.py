"""IR → torch evaluation: visitors, constant exponents as numbers, reused subtrees."""

from __future__ import annotations

import pytest
import torch

from gradscope.errors import UsageError
from gradscope.expr import ir
from gradscope.expr.parse import parse
from gradscope.expr.to_torch import evaluate

X = {"x": torch.tensor([0.0, 1.5, 4.0], dtype=torch.float64, requires_grad=True),
     "y": torch.tensor([2.0, 0.5, 3.0], dtype=torch.float64)}


def test_constant_exponent_is_passed_as_a_number():
    seen = []
    out = evaluate(parse("x**2 + x**y"), X, visit=lambda node, args, out: seen.append(
        (node.op, [type(a).__name__ for a in args])))
    assert ("pow", ["Tensor", "float"]) in seen  # x**2: torch's fast squaring kernel
    assert ("pow", ["Tensor", "Tensor"]) in seen  # x**y: a tensor exponent stays a tensor
    assert out.grad_fn is not None
    want = X["x"].detach() ** 2 + X["x"].detach() ** X["y"]
    assert torch.allclose(out.detach(), want)


def test_constant_exponent_keeps_torch_gradient_conventions_at_zero():
    for expr, grad0 in (("x**2", 0.0), ("x**0", 0.0), ("x**0.5", float("inf"))):
        x = torch.tensor([0.0], dtype=torch.float64, requires_grad=True)
        evaluate(parse(expr), {"x": x}).sum().backward()
        assert x.grad.item() == grad0, expr


def test_reuse_skips_evaluation_and_visits_of_known_subtrees():
    expr = parse("sin(x) * exp(y)")
    right = expr.root.args[1]
    assert isinstance(right, ir.Call) and right.op == "exp"
    known = torch.full((3,), 7.0, dtype=torch.float64)
    visited = []
    out = evaluate(expr, X, visit=lambda node, args, out: visited.append(node.op),
                   reuse={id(right): known})
    assert visited == ["sin", "mul"]
    assert torch.allclose(out.detach(), torch.sin(X["x"].detach()) * 7.0)


def test_shape_errors_name_the_subexpression():
    with pytest.raises(UsageError, match=r"cannot compute `x \+ z` on shapes \(3,\), \(2,\)"):
        evaluate(parse("x + z"), {"x": X["y"], "z": torch.ones(2, dtype=torch.float64)})
