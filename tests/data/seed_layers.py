"""The seeds' own Functions as their authors wrote them (seeds/001), bugs included: the round
straight-through estimator (a surrogate) and the clamp whose backward writes 1 above the range
where 0 belongs; and a function using both."""

import torch


class RoundGradient(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.round()

    @staticmethod
    def backward(ctx, g):
        return g


class ClampGradient(torch.autograd.Function):
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


def combo(x):
    return (RoundGradient.apply(x) * 2 + ClampGradient.apply(x)).sum()


class TooFew(torch.autograd.Function):
    """A backward that forgets the second input's gradient."""

    @staticmethod
    def forward(ctx, x, y):
        return x * y

    @staticmethod
    def backward(ctx, g):
        return g


class TwoReturns(torch.autograd.Function):
    """relu whose backward has two returns; the one a long input takes doubles the gradient."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        if x.numel() > 4:
            return 2 * g * (x > 0).to(g.dtype)  # the bug, on this path only
        return g * (x > 0).to(g.dtype)


def two_returns(x):
    return TwoReturns.apply(x) * 1.5


class TwoReturnsOnce(torch.autograd.Function):
    """The same, its backward wrapped by @once_differentiable (the returns are still seen)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(min=0)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        if x.numel() > 4:
            return 2 * g * (x > 0).to(g.dtype)  # the bug, wrapped
        return g * (x > 0).to(g.dtype)


def two_returns_once(x):
    return TwoReturnsOnce.apply(x) * 1.5
