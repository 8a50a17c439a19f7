"""Deliberately broken backward passes, as the seeds wrote them or as they commonly go wrong.
gradscope must catch each one (tests run every command in examples/README.md)."""

import torch
from torch.autograd import Function


class ClampSeeds(Function):
    """seeds/000's ClampGradient as written: `grad_input[x > 1] = 1` writes a constant where
    grad_output belonged (and the clamped forward is flat there, so the true gradient is 0)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(min=0, max=1)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        grad_input = g.clone()
        grad_input[x < 0] = 0
        grad_input[x > 1] = 1
        return grad_input


class KillHeadForgetful(Function):
    """KillHead whose backward forgets to zero the head columns."""

    @staticmethod
    def forward(ctx, input, n):
        result = input.clone()
        result[:, 0:n] = 0
        return result

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output.clone(), None


class AbsProdOneGradient(Function):
    """(u, v) ↦ |u·v| whose backward returns only the gradient for u."""

    @staticmethod
    def forward(ctx, u, v):
        ctx.save_for_backward(u, v)
        return (u * v).abs()

    @staticmethod
    def backward(ctx, grad_output):
        u, v = ctx.saved_tensors
        return (u * v).sign() * grad_output * v


class MyLayer(torch.nn.Module):
    """seeds/000's MyLayer as written: `torch.tensor(3,3)` and no super().__init__()."""

    def __init__(self):
        mytensor = torch.tensor(3, 3)
        torch.nn.init.uniform(mytensor, 0, 1)
        self.mytensor = torch.nn.Parameter(mytensor)

    def forward(self, input):
        return input * self.mytensor
