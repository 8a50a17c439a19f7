"""A Function with a 1.5x backward whose output leaves in float32 from float64 inputs: at
torch's step (1e-6) the float32 round-off widens gradscope's finite-difference error bound
enough to take in the wrong gradient; torch's plain comparison rejects it, and so must the
drop-in."""

import torch


class CosBug(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.cos() * 1.5


def ends_float_bug(x):
    return CosBug.apply(x).float() * 3
