"""Functions of a symmetric matrix, whose torch gradient is symmetric while the forward reads
one triangle (a documented departure), correct and with a bug the departure must never
excuse. Each takes a symmetric positive-definite `a` (`--at a=[[2,0.5,0.1],[0.5,1.5,0.3],
[0.1,0.3,1]]`)."""

import torch


def eigenvalues(a: torch.Tensor) -> torch.Tensor:
    return torch.linalg.eigvalsh(a) * torch.tensor([1.0, 2.0, 3.0], dtype=a.dtype)


def factor(a: torch.Tensor) -> torch.Tensor:
    return torch.linalg.cholesky(a, upper=True)


class _DoubledEigenvalues(torch.autograd.Function):
    """eigvalsh whose backward doubles the gradient: a bug in any triangle."""

    @staticmethod
    def forward(ctx, a):
        values, vectors = torch.linalg.eigh(a)
        ctx.save_for_backward(vectors)
        return values

    @staticmethod
    def backward(ctx, g):
        (vectors,) = ctx.saved_tensors
        return 2 * (vectors * g.unsqueeze(-2)) @ vectors.mT


def doubled(a: torch.Tensor) -> torch.Tensor:
    return _DoubledEigenvalues.apply(a) * torch.tensor([1.0, 2.0, 3.0], dtype=a.dtype)
