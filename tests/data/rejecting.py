"""Targets that reject some of the points gradscope evaluates on its own initiative (finite
differences, refinement, projections, tangents): a probability pushed past 1, an ODE solver's
"underflow in dt". The rejection is a note, never the check's failure — and never an excuse for
a wrong gradient at the elements that could be compared."""

import torch


def probability(p):
    """Refuses anything past 1: at p == 1 exactly every step up is refused."""
    if (p > 1).any():
        raise ValueError("probability pushed past 1")
    return (p * torch.log1p(p)).sum()


def underflow(x):
    """Refuses points too close to 0: a step of h/2 from x = h/2 lands on it."""
    if (x.abs() < 1e-12).any():
        raise RuntimeError("underflow in dt")
    return (x ** 3).sum()


class _Triple(torch.autograd.Function):
    """d/dp p² is 2p; this backward says 3p."""

    @staticmethod
    def forward(ctx, p):
        ctx.save_for_backward(p)
        return p * p

    @staticmethod
    def backward(ctx, grad):
        (p,) = ctx.saved_tensors
        return grad * 3 * p


def wrong_probability(p):
    """A wrong gradient beside an element at the edge: must still fail."""
    if (p > 1).any():
        raise ValueError("probability pushed past 1")
    return _Triple.apply(p).sum()


def rejects_everything(x):
    """Refuses every value that is not a multiple of 1/2: every perturbed point."""
    if not torch.equal(x * 2, (x * 2).round()):
        raise ValueError("only multiples of 1/2 are allowed")
    return (x * x).sum()
