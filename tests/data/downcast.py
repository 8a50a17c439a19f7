"""Code that computes in float32 inside a float64 check (`.float()` and back): the check
follows float32; a wrong backward under the cast still fails."""

import torch


def inner_float(x):
    return x.float().sin().double() * x


class CosTimesTwo(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.cos() * 1.5  # should be g * cos(x)


def inner_float_bug(x):
    return CosTimesTwo.apply(x.float()).double() * x
