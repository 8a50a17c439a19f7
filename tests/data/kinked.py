"""Functions checked exactly at their kinks: a right absolute value (autograd's 0 at 0 lies
between the one-sided slopes −1 and 1) and wrong twins whose backward at 0 lies outside them,
a max with ties, and a relu whose backward doubles the slope at the kink only."""

import torch


class Abs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.abs()

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * torch.sign(x)  # 0 at 0: torch's convention, inside [-1, 1]


class AbsOffAtZero(Abs):
    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * torch.where(x == 0, torch.full_like(x, 3.0), torch.sign(x))  # 3: outside


class ReluDoubledAtZero(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp_min(0)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * torch.where(x == 0, torch.full_like(x, 2.0), (x > 0).to(x.dtype))


def abs_loss(x):
    return Abs.apply(x).sum()


def abs_off_loss(x):
    return AbsOffAtZero.apply(x).sum()


def relu_off_loss(x):
    return (ReluDoubledAtZero.apply(x) * torch.arange(1.0, x.numel() + 1).reshape(x.shape)).sum()


def max_of_ties(x):
    return torch.max(x, dim=-1).values.sum()
