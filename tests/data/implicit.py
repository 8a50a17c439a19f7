"""An implicit layer: the root of a residual by bisection, differentiated implicitly in
backward; the residual is an nn.Module whose parameter reaches the forward through the callable
(the Function is given it again only to return its gradient), right and with the parameter's
gradient sign-flipped."""

import torch
from torch import nn


class Residual(nn.Module):
    """f(x, theta) = a·x³ + x − theta, monotone in x: its root in x is the layer's output."""

    def __init__(self):
        super().__init__()
        self.a = nn.Parameter(torch.tensor(0.5, dtype=torch.float64))

    def forward(self, x, theta):
        return self.a * x ** 3 + x - theta


class RootFind(torch.autograd.Function):
    """The root of fn(x, theta) = 0 by bisection; backward by implicit differentiation. fn's
    parameters are passed after theta only so that backward can return their gradient."""

    @staticmethod
    def forward(ctx, fn, theta, *params):
        lo = torch.full_like(theta, -20.0)
        hi = torch.full_like(theta, 20.0)
        for _ in range(80):
            mid = (lo + hi) / 2
            below = fn(mid, theta) < 0
            lo, hi = torch.where(below, mid, lo), torch.where(below, hi, mid)
        x = (lo + hi) / 2
        ctx.fn = fn
        ctx.save_for_backward(x, theta, *params)
        return x

    @staticmethod
    def backward(ctx, g):
        x, theta, *params = ctx.saved_tensors
        with torch.enable_grad():
            xx = x.detach().requires_grad_(True)
            th = theta.detach().requires_grad_(True)
            val = ctx.fn(xx, th)
            dx, = torch.autograd.grad(val.sum(), xx, retain_graph=True)
            grads = torch.autograd.grad(val, [th, *params], grad_outputs=g / dx)
        return (None, *(-gr for gr in grads))


class RootFindBug(RootFind):
    @staticmethod
    def backward(ctx, g):
        _, dtheta, *dparams = RootFind.backward(ctx, g)
        return (None, dtheta, *(-d for d in dparams))  # the parameters' sign flipped


fn = Residual()


def root_loss(theta):
    return (RootFind.apply(fn, theta, *fn.parameters()) ** 2).sum()


def root_bug_loss(theta):
    return (RootFindBug.apply(fn, theta, *fn.parameters()) ** 2).sum()
