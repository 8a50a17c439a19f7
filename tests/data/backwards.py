"""Custom autograd.Functions whose backward is wrong in one specific way each (and one that
is right), for the custom-backward checks."""

import torch


class Double(torch.autograd.Function):
    """backward ignores grad_output: right for a ones upstream only."""

    @staticmethod
    def forward(ctx, x):
        return 2 * x

    @staticmethod
    def backward(ctx, g):
        return torch.full_like(g, 2.0)


class InPlace(torch.autograd.Function):
    """backward writes into grad_output."""

    @staticmethod
    def forward(ctx, x):
        return x * 3

    @staticmethod
    def backward(ctx, g):
        return g.mul_(3)


class Noisy(torch.autograd.Function):
    """backward is not deterministic."""

    @staticmethod
    def forward(ctx, x):
        return x * 3

    @staticmethod
    def backward(ctx, g):
        return g * 3 + 1e-3 * torch.rand_like(g)


class Jittery(Noisy):
    """backward is not deterministic, by far less than the comparison's tolerance (as atomics
    reordering a float64 sum are)."""

    @staticmethod
    def backward(ctx, g):
        return g * 3 + 1e-13 * torch.rand_like(g)


class WrongShape(torch.autograd.Function):
    """backward returns a scalar for a (2, 3) input."""

    @staticmethod
    def forward(ctx, x):
        return x * 3

    @staticmethod
    def backward(ctx, g):
        return g.sum()


class Cube(torch.autograd.Function):
    """x³, right to first order; the detach breaks the second derivative."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x * x.detach()


class GradientForN(torch.autograd.Function):
    """backward returns a tensor for the non-tensor argument n."""

    @staticmethod
    def forward(ctx, input, n):
        ctx.n = n
        return input * 1

    @staticmethod
    def backward(ctx, g):
        return g, g


class WrongAtLast(torch.autograd.Function):
    """sum(x²) whose gradient ignores x: wrong everywhere but where 2·x happens to be 2."""

    @staticmethod
    def forward(ctx, x):
        return (x * x).sum()

    @staticmethod
    def backward(ctx, g):
        return g * 2 * torch.ones(200, dtype=torch.float64)


class BlindSquare(torch.autograd.Function):
    """x² whose backward uses |grad_output|: right for the ones upstream only."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g.abs()


class SolvedSquare(torch.autograd.Function):
    """x², its backward as an iterative solver returns it: right to a relative 5e-7 that
    depends on the upstream (linear in grad_output only to that precision)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 2 * x * (1 + 5e-7 * torch.cos(1e4 * grad))


class SolvedScaledSquare(SolvedSquare):
    """The same solver wrapped around a wrong backward (the factor 2 forgotten)."""

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x * (1 + 5e-7 * torch.cos(1e4 * grad))


class LooseSolvedSquare(SolvedSquare):
    """x² through a solver stopped at a relative 1e-5: wrong beyond gradscope's own tolerance
    (and not linear there), right at a test's 1e-3."""

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 2 * x * (1 + 1e-5 * torch.cos(1e4 * grad))


def _solve(grad):
    raise RuntimeError("this torch no longer has the solver's routine")


class RaisesInBackward(torch.autograd.Function):
    """A library's backward that raises on this torch version, inside a helper."""

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return _solve(grad)


class SquaredUpstream(SolvedSquare):
    """x² whose backward squares its gradient's magnitude: right for the 0/1 upstreams torch's
    gradcheck builds each Jacobian column with, wrong for any other upstream."""

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * grad.abs() * 2 * x
