"""Custom Functions whose own backward departs from their forward's derivative while the
function around them is differentiated right: an eigh-style Function returning the
symmetrised gradient (as torch's own eigh does) inside a function of a symmetric matrix, and
one that does not (the same Function fed an unsymmetric matrix: the target is wrong too)."""

import torch


class SymEigvals(torch.autograd.Function):
    """Eigenvalues of a symmetric matrix; backward returns V diag(g) Vᵀ, the symmetric
    gradient — not the derivative of eigvalsh, which reads one triangle only."""

    @staticmethod
    def forward(ctx, a):
        w, v = torch.linalg.eigh(a)
        ctx.save_for_backward(v)
        return w

    @staticmethod
    def backward(ctx, g):
        (v,) = ctx.saved_tensors
        return v @ torch.diag_embed(g) @ v.mT


def symmetric_spectrum(m):
    """A function of m through the symmetric (m + mᵀ)/2: its gradient in m is right."""
    return (SymEigvals.apply((m + m.mT) / 2) * torch.arange(1.0, m.shape[-1] + 1,
                                                              dtype=m.dtype)).sum()


def lower_spectrum(m):
    """The same Function fed a matrix whose upper triangle eigh never reads: wrong in m."""
    return (SymEigvals.apply(torch.tril(m) + torch.tril(m, -1).mT + torch.triu(m, 1))
            * torch.arange(1.0, m.shape[-1] + 1, dtype=m.dtype)).sum()
