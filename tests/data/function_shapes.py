"""Custom Functions of the shapes torch accepts, and code that reaches its inputs or modules in
the ways real code does — each right one with a twin that has a real bug. torch's gradcheck
and gradgradcheck complete on every one; gradscope must too, with the same verdict."""

import torch
from torch import nn
from torch.autograd import Function
from torch.autograd.function import once_differentiable


class Exp(Function):
    """Old-style, its backward calls the Function itself (so it is twice differentiable)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.exp()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * Exp.apply(x)


class ExpBug(Exp):
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * ExpBug.apply(x) * (1 + 0.1 * (x > 0))  # the bug: 1.1× where x > 0


class Mul(Function):
    """Two inputs, each gradient made by the Function itself."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return Mul.apply(g, b), Mul.apply(g, a)


class Scale(Function):
    """setup_context style, a non-differentiable second output, grads not materialised."""

    @staticmethod
    def forward(x, k):
        return x * k, (x > 0)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.k = inputs[1]
        ctx.mark_non_differentiable(output[1])
        ctx.set_materialize_grads(False)

    @staticmethod
    def backward(ctx, g, _):
        return (None if g is None else g * ctx.k), None


class Doubled(Function):
    """Writes into its input (mark_dirty)."""

    @staticmethod
    def forward(ctx, x):
        ctx.mark_dirty(x)
        return x.mul_(2)

    @staticmethod
    def backward(ctx, g):
        return 2 * g


class Once(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.tanh()

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (1 - x.tanh() ** 2)


exp_apply = Exp.apply  # apply bound before any check runs


def exp2(x):
    return Exp.apply(Exp.apply(x) * 0.1)


def exp_bug(x):
    return ExpBug.apply(x)


def scaled(x):
    y, positive = Scale.apply(x, 3.0)
    return y * positive


def doubled(x):
    return Doubled.apply(x.clone()).sin()


def once(x):
    return Once.apply(x)


def bound(x):
    return exp_apply(x) * 2


def energy(x):
    """Differentiates inside its forward (an energy model's force)."""
    with torch.enable_grad():
        e = (x.sin() ** 2).sum()
        (g,) = torch.autograd.grad(e, x, create_graph=True)
    return g


def vjp_of_mul(a, b):
    """A first-order VJP taken inside the function through a Function whose backward calls
    itself (what gradgradcheck differentiates)."""
    with torch.enable_grad():
        y = Mul.apply(a, b)
        ga, gb = torch.autograd.grad(y, (a, b), torch.ones_like(y), create_graph=True)
    return torch.cat([ga.reshape(-1), gb.reshape(-1)])


class HalfGrad(Function):
    @staticmethod
    def forward(ctx, w):
        return w.clone()

    @staticmethod
    def backward(ctx, g):
        return 0.5 * g


def assigns_weight(w, x):
    """Assigns a checked input to a module: it must stay an nn.Parameter."""
    lin = nn.Linear(3, 3, bias=False).double()
    lin.weight = w
    return lin(x)


def assigns_weight_bug(w, x):
    lin = nn.Linear(3, 3, bias=False).double()
    lin.weight = w
    return lin(HalfGrad.apply(x))


model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)).double()
alias = model
first = model[0]


def through_two_names(x):
    """Reaches one Linear as `first` and as `alias.0`."""
    return alias(x).sum() + first(x).sum()
