"""The seeds' custom autograd Functions and Module, written correctly.

Check any of them with gradscope, e.g. `gradscope check examples/seed_functions.py:KillHead
--at input=randn(3,8) --arg n=2` (see examples/README.md for each command and its output).
"""

import torch
from torch.autograd import Function


class RoundSTE(Function):
    """round() with a straight-through backward (seeds/000's RoundGradient): the forward is
    piecewise constant, the backward passes grad_output through unchanged — a deliberate
    surrogate gradient."""

    @staticmethod
    def forward(ctx, x):
        return x.round()

    @staticmethod
    def backward(ctx, g):
        return g


class Clamp01(Function):
    """clamp(x, 0, 1) with a correct hand-written backward: gradient 1 inside, 0 outside."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(min=0, max=1)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        grad_input = g.clone()
        grad_input[(x < 0) | (x > 1)] = 0
        return grad_input


class KillHead(Function):
    """Sets the first n columns to zero (Fleuret, EE-559 5.7); n is a non-tensor argument."""

    @staticmethod
    def forward(ctx, input, n):
        ctx.n = n
        result = input.clone()
        result[:, 0:n] = 0
        return result

    @staticmethod
    def backward(ctx, grad_output):
        result = grad_output.clone()
        result[:, 0 : ctx.n] = 0
        return result, None


class AbsProd(Function):
    """(u, v) ↦ |u·v| elementwise, with both gradients."""

    @staticmethod
    def forward(ctx, u, v):
        ctx.save_for_backward(u, v)
        return (u * v).abs()

    @staticmethod
    def backward(ctx, grad_output):
        u, v = ctx.saved_tensors
        s = (u * v).sign() * grad_output
        return s * v, s * u


class MyLayer(torch.nn.Module):
    """seeds/000's layer, fixed: super().__init__() first, a (3, 3) parameter."""

    def __init__(self, size=3):
        super().__init__()
        self.mytensor = torch.nn.Parameter(torch.empty(size, size).uniform_(0, 1))

    def forward(self, input):
        return input * self.mytensor


def soft_threshold(x, lam):
    """A plain function of a tensor and a non-tensor argument."""
    return torch.sign(x) * torch.relu(x.abs() - lam)
