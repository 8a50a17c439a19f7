"""Functions of a symmetric matrix, whose torch gradient is symmetric while the forward reads
one triangle (a documented departure), correct and with a bug the departure must never
excuse. Each takes a symmetric positive-definite `a` (`--at a=[[2,0.5,0.1],[0.5,1.5,0.3],
[0.1,0.3,1]]`). And a custom Function whose own backward returns that symmetric gradient (as
torch's eigh does), used where it departs from nothing the target sees and where it does."""

import torch


def eigenvalues(a: torch.Tensor) -> torch.Tensor:
    return torch.linalg.eigvalsh(a) * torch.tensor([1.0, 2.0, 3.0], dtype=a.dtype)


def factor(a: torch.Tensor) -> torch.Tensor:
    return torch.linalg.cholesky(a, upper=True)


class SymmetricEigenvalues(torch.autograd.Function):
    """Eigenvalues of a symmetric matrix; backward returns V diag(g) Vᵀ, the symmetric
    gradient — not the derivative of eigh's forward, which reads one triangle only."""

    @staticmethod
    def forward(ctx, a):
        values, vectors = torch.linalg.eigh(a)
        ctx.save_for_backward(vectors)
        return values

    @staticmethod
    def backward(ctx, g):
        (vectors,) = ctx.saved_tensors
        return (vectors * g.unsqueeze(-2)) @ vectors.mT


class _DoubledEigenvalues(SymmetricEigenvalues):
    """eigvalsh whose backward doubles the gradient: a bug in any triangle."""

    @staticmethod
    def backward(ctx, g):
        return 2 * SymmetricEigenvalues.backward(ctx, g)


def doubled(a: torch.Tensor) -> torch.Tensor:
    return _DoubledEigenvalues.apply(a) * torch.tensor([1.0, 2.0, 3.0], dtype=a.dtype)



def _weights(m: torch.Tensor) -> torch.Tensor:
    return torch.arange(1.0, m.shape[-1] + 1, dtype=m.dtype)


def symmetric_spectrum(m: torch.Tensor) -> torch.Tensor:
    """A function of any square m through the symmetric (m + mᵀ)/2: its gradient in m is
    right, though SymmetricEigenvalues' own backward departs from its forward's derivative."""
    return (SymmetricEigenvalues.apply((m + m.mT) / 2) * _weights(m)).sum()


def lower_spectrum(m: torch.Tensor) -> torch.Tensor:
    """The same Function fed a matrix whose strict upper triangle, which eigh never reads,
    comes from m's: the symmetric gradient reaches m there, where the derivative is 0."""
    return (SymmetricEigenvalues.apply(torch.tril(m) + torch.tril(m, -1).mT + torch.triu(m, 1))
            * _weights(m)).sum()
