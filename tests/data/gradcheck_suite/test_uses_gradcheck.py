"""A user's test module that calls torch's gradcheck the usual ways (run by
tests/testing/test_gradcheck.py with and without `pytest --gradscope`)."""

import torch
from torch.autograd import gradcheck as imported_early


def checker(fn, inputs, **kw):
    """A project's own wrapper, looking torch's function up when called."""
    return torch.autograd.gradcheck(fn, inputs, **kw)


class Scaled(torch.autograd.Function):
    """backward is off by 0.05 %: below torch's default tolerance, above gradscope's."""

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 1.999


def test_correct_through_a_wrapper():
    x = torch.randn(4, dtype=torch.float64, requires_grad=True)
    assert checker(torch.tanh, (x,))


def test_correct_gradgradcheck():
    x = torch.randn(4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradgradcheck(torch.sin, (x,))


def test_small_bug():
    x = torch.randn(4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(Scaled.apply, (x,))


def test_imported_name():
    # imported at collection, after the switch: routed too
    x = torch.randn(4, dtype=torch.float64, requires_grad=True)
    assert imported_early(torch.exp, (x,))
