"""Surrogates declared with gradscope's decorator (this file imports gradscope, as a user's
file that opts in would)."""

import torch

import gradscope


@gradscope.surrogate("PACT-style scaled straight-through")
class ScaledIdentity(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1.0

    @staticmethod
    def backward(ctx, g):
        return 0.25 * g


@gradscope.surrogate
def clipped(x):
    """A function declared whole: bare decorator."""
    return ScaledIdentity.apply(x)


@gradscope.surrogate("declared but exact")
class Exact(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 3

    @staticmethod
    def backward(ctx, g):
        return 3 * g


class NotLinear(torch.autograd.Function):
    """Declared by --surrogate in the tests: the linearity check still fails it."""

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return torch.full_like(g, 2.0)
