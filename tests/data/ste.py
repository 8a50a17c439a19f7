"""Straight-through estimators in a quantised layer: right (passes the gradient on), with its
sign flipped (its surrogate points against the forward), and a right one beside a wrong
Function elsewhere (that one is the culprit, not the estimator)."""

import torch
from corpus import RoundSTE  # (the corpus's straight-through round: identity backward)


class RoundSTEFlipped(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return torch.round(x)

    @staticmethod
    def backward(ctx, g):
        return -g  # the sign flipped


class DoubleTanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return 2 * g * (1 - y * y)  # a 2 too many


torch.manual_seed(0)
lin = torch.nn.Linear(4, 3)


def quantised(x):
    return RoundSTE.apply(lin(x) * 3).sum()


def quantised_flipped(x):
    return RoundSTEFlipped.apply(lin(x) * 3).sum()


def quantised_then_wrong(x):
    return DoubleTanh.apply(RoundSTE.apply(lin(x) * 3) + x.sum()).sum()
