"""Functions whose outputs sum to one along a row (a softmax written by hand): an upstream of
ones has a zero VJP through them whatever their backward scales, so a wrong backward shows
only under other upstreams — the in-place check must still name it, and never the right one."""

import torch


class RowSoftmaxBug(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.softmax(x, -1)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return 1.5 * y * (g - (g * y).sum(-1, keepdim=True))  # 1.5x too large


class RowSoftmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.softmax(x, -1)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return y * (g - (g * y).sum(-1, keepdim=True))


def attend_bug(x):
    return RowSoftmaxBug.apply(x * 2)


def attend(x):
    return RowSoftmax.apply(x * 2)
