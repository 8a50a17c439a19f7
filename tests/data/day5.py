"""A new user's day, round 5: code that refuses the shapes or values it is given, and a
Function whose backward is wrong for its second argument."""

import torch

layer = torch.nn.Linear(4, 2).double()


def matmul(a, b):
    return a @ b


def through_a_layer(a):
    return layer(a)


def positive_only(a):
    if (a < 0).any():
        raise ValueError("needs a >= 0")
    return a.sqrt()


class DoubledSecond(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        return g * y, g * x * 2
