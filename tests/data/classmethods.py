"""Custom Functions written with classmethods — `forward(cls, ctx, ...)`, `backward(cls, ctx,
...)` — as a popular sparse-activation library writes all of its Functions; one right, one
whose backward forgets the softmax's centring, and a function calling each."""

import torch


class ClassSoftmax(torch.autograd.Function):
    @classmethod
    def forward(cls, ctx, x, dim=-1):
        y = torch.softmax(x, dim)
        ctx.save_for_backward(y)
        ctx.dim = dim
        return y

    @classmethod
    def backward(cls, ctx, g):
        (y,) = ctx.saved_tensors
        return y * (g - (g * y).sum(ctx.dim, keepdim=True)), None


class ClassSoftmaxBug(ClassSoftmax):
    @classmethod
    def backward(cls, ctx, g):
        (y,) = ctx.saved_tensors
        return y * g, None  # the bug: the centring term is missing


def softmax(x):
    return ClassSoftmax.apply(x, -1)


def softmax_bug(x):
    return ClassSoftmaxBug.apply(x, -1)
