"""Functions of a (batch, n) input whose Jacobians are sparse (each output moves with a few
elements of its own row), with backwards right and wrong: finite differences share
evaluations between columns where autograd's sparsity pattern allows, and must still find
every wrong gradient, placed at its element."""

import torch


def row_softmax(x):
    """Each row's softmax, scaled by the row's sum: dense within a row, zero across rows."""
    return torch.softmax(x, -1) * x.sum(-1, keepdim=True)


class Halves(torch.autograd.Function):
    """y = 2·x[:, :-1], and backward right."""

    @staticmethod
    def forward(ctx, x):
        return 2 * x[:, :-1]

    @staticmethod
    def backward(ctx, g):
        grad = torch.zeros(g.shape[0], g.shape[1] + 1, dtype=g.dtype)
        grad[:, :-1] = 2 * g
        return grad


class Shifted(Halves):
    """Halves, but backward writes each gradient one column to the right (an index bug:
    autograd's pattern claims column j+1 where column j belongs)."""

    @staticmethod
    def backward(ctx, g):
        grad = torch.zeros(g.shape[0], g.shape[1] + 1, dtype=g.dtype)
        grad[:, 1:] = 2 * g
        return grad


class Blind(torch.autograd.Function):
    """y = x · x[:, :1] (every element times its row's first); backward forgets the first
    element's part through the others: autograd's pattern misses those dependencies."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x[:, :1]

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        grad = g * x[:, :1]
        grad[:, 0] = grad[:, 0] + g[:, 0] * x[:, 0]  # (only the diagonal's second term)
        return grad


class RowScaled(torch.autograd.Function):
    """row_softmax with a backward 1.0005 × the derivative: a constant factor, which the
    groups of columns refine as groups."""

    @staticmethod
    def forward(ctx, x):
        s = torch.softmax(x, -1)
        total = x.sum(-1, keepdim=True)
        ctx.save_for_backward(s, total)
        return s * total

    @staticmethod
    def backward(ctx, g):
        s, total = ctx.saved_tensors
        gs = (g * s).sum(-1, keepdim=True)
        return (total * s * (g - gs) + gs) * 1.0005


class Dropped(torch.autograd.Function):
    """y = 3·x; backward drops the first column's gradient: autograd claims that no input
    moves those outputs at all."""

    @staticmethod
    def forward(ctx, x):
        return 3 * x

    @staticmethod
    def backward(ctx, g):
        grad = 3 * g
        grad[:, 0] = 0
        return grad
