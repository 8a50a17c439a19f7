"""What a row is made of: its signature read as torch documents it, the slots of a call, the
integer arguments that must be data, which arguments can cross a kink, constant folding kept
bounded."""

from __future__ import annotations

import math

import pytest
import torch

from gradscope.expr.ops import OPS
from gradscope.expr.ops.base import (
    OPTIONAL,
    REQUIRED,
    TENSOR,
    TENSORS,
    bounded_pow,
    signature,
    straight_through,
    whole_nonnegative,
)


def test_a_signature_as_torch_documents_it():
    params = signature("input, other?, *tensors, dim: dims = None, keepdim: bool = False, "
                       "p: float = inf, reduction: str = 'mean'", reduction=("mean", "sum"))
    kinds = [(p.name, p.kind, p.default) for p in params]
    assert kinds[:3] == [("input", TENSOR, REQUIRED), ("other", OPTIONAL, None),
                         ("tensors", TENSORS, REQUIRED)]
    assert params[2].star and params[3].kind == "dims" and params[4].default is False
    assert params[5].default == math.inf and params[6].choices == ("mean", "sum")
    assert [p.tensor for p in params][:3] == [True, True, True] and not params[3].tensor


def test_a_rows_slots_and_integer_arguments():
    gather = OPS["gather"]
    index = torch.tensor([[0, 1]], dtype=torch.float64)
    assert gather.floats_for_integers([torch.zeros(2, 2), index]) == ["index"]
    assert "--const" in gather.integers_hint("index")
    assert OPS["add"].elementwise and OPS["round"].vanishing and not OPS["sin"].vanishing


def test_which_arguments_can_cross_a_kink():
    # x**2 is smooth for a whole exponent >= 0; x**0.5 is not; x/3 has no pole, 3/x has one
    pow_, div = OPS["pow"], OPS["div"]
    assert pow_.kinky_args((None, 2.0)) == () and pow_.kinky_args((None, 0.5)) == (0, 1)
    assert div.kinky_args((None, 3.0)) == (1,) and OPS["sin"].kinky_args((None,)) == (0,)
    assert whole_nonnegative(2.0) and not whole_nonnegative(0.5) and not whole_nonnegative(-1)
    assert not whole_nonnegative(None) and not whole_nonnegative(float("nan"))


def test_constant_folding_and_straight_through_snippets():
    assert bounded_pow(2.0, 10.0) == 1024.0
    with pytest.raises(OverflowError):
        bounded_pow(2.0, 1e9)
    x = torch.tensor([0.4, 1.6], requires_grad=True)
    assert straight_through("round") == "x + (x.round() - x).detach()"
    y = x + (x.round() - x).detach()
    y.sum().backward()
    assert y.tolist() == [0.0, 2.0] and x.grad.tolist() == [1.0, 1.0]
