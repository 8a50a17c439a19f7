"""Outputs padded with -inf, as attention masks are: compared where they are defined."""

import torch


class ScaledWrong(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 3  # 1.5 × the derivative


def padded_wrong(x):
    y = ScaledWrong.apply(x)
    return torch.cat([y, torch.full((3,), float("-inf"), dtype=y.dtype)])


def padded_right(x):
    return torch.cat([x * 2, torch.full((3,), float("-inf"), dtype=x.dtype)])
