"""A model whose custom Function's parameter is a sliver of the gradient's norm: a 256 × 256
linear layer h, plus 10⁻³ · ScaleOff(h, s) (h · s, one scalar s), whose backward gets s's
gradient 2 % too large. Projections over every tensor at once cannot see an error of 10⁻⁵ of
the norm; one over s alone, pointed at by the in-place check, can. `right_loss` uses the
correct Function."""

import torch


class Scale(torch.autograd.Function):
    """y = x · s for a scalar parameter s."""

    @staticmethod
    def forward(ctx, x, s):
        ctx.save_for_backward(x, s)
        return x * s

    @staticmethod
    def backward(ctx, g):
        x, s = ctx.saved_tensors
        return g * s, (g * x).sum()


class ScaleOff(Scale):
    @staticmethod
    def backward(ctx, g):
        x, s = ctx.saved_tensors
        return g * s, (g * x).sum() * 1.02  # 2 % too large


class Model(torch.nn.Module):
    def __init__(self, fn: type = Scale):
        super().__init__()
        torch.manual_seed(0)
        self.big = torch.nn.Linear(256, 256)
        self.s = torch.nn.Parameter(torch.tensor(0.5))
        self.fn = fn

    def forward(self, x):
        h = torch.tanh(self.big(x))
        return h + 1e-3 * self.fn.apply(h, self.s)  # (s: a sliver of the gradient)


right, off = Model(Scale), Model(ScaleOff)


def right_loss(x):
    return right(x).pow(2).mean()


def off_loss(x):
    return off(x).pow(2).mean()
