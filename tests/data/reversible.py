"""A reversible block as graph-network libraries write it (torch_geometric's GroupAddRev): its
Function saves only the output, recomputes the input with the inverse in backward and re-runs
its sub-modules there, differentiating with respect to the parameters it was handed — the
module's own `self.parameters()` at forward time. A check that swaps parameters in for the
forward only breaks it; a planted twin scales the parameters' gradients by 1.5. `Freeing`
also frees its input's memory in forward and restores it in backward, as GroupAddRev does: a
check that hands the user's code its own values loses them (or reads freed memory)."""

import torch
from torch import nn


class Invertible(torch.autograd.Function):
    @staticmethod
    def forward(ctx, block, x, *weights):
        ctx.block = block
        ctx.count = len(weights)
        with torch.no_grad():
            y = block.coupled(x)
        ctx.save_for_backward(y, *weights)
        return y

    @staticmethod
    def backward(ctx, grad_y):
        y, *weights = ctx.saved_tensors
        block = ctx.block
        with torch.no_grad():
            x = block.inverse(y)
        with torch.enable_grad():
            x = x.detach().requires_grad_(True)
            again = block.coupled(x)
            grads = torch.autograd.grad(again, (x, *weights), grad_y)
        grad_x, *grad_w = grads
        grad_w = [g * block.weight_factor for g in grad_w]
        return (None, grad_x, *grad_w)


class RevBlock(nn.Module):
    """y1 = x1 + F(x2), y2 = x2 + G(y1): additive coupling over the feature halves."""

    weight_factor = 1.0

    def __init__(self, features: int = 4):
        super().__init__()
        torch.manual_seed(0)
        half = features // 2
        self.f = nn.Sequential(nn.Linear(half, half), nn.Tanh())
        self.g = nn.Sequential(nn.Linear(half, half), nn.Tanh())

    def coupled(self, x):
        x1, x2 = x.chunk(2, dim=-1)
        y1 = x1 + self.f(x2)
        y2 = x2 + self.g(y1)
        return torch.cat([y1, y2], dim=-1)

    def inverse(self, y):
        y1, y2 = y.chunk(2, dim=-1)
        x2 = y2 - self.g(y1)
        x1 = y1 - self.f(x2)
        return torch.cat([x1, x2], dim=-1)

    def forward(self, x):
        return Invertible.apply(self, x, *self.parameters())


class RevBlockBug(RevBlock):
    weight_factor = 1.5


def rev_loss(x):
    """A training-style function over a module-level block."""
    return (BLOCK(x) ** 2).sum()


BLOCK = RevBlock()


class FreeingInvertible(torch.autograd.Function):
    """GroupAddRev's InvertibleFunction in small: the input's storage freed after forward,
    resized and set to the inverse's values in backward."""

    @staticmethod
    def forward(ctx, block, x, *weights):
        ctx.block, ctx.weights = block, weights
        with torch.no_grad():
            y = block.coupled(x.detach())
        x.untyped_storage().resize_(0)  # (the memory a reversible network saves)
        ctx.x, ctx.y = x, y
        return y.detach()

    @staticmethod
    def backward(ctx, grad_y):
        block, x = ctx.block, ctx.x
        with torch.no_grad():
            again = block.inverse(ctx.y)
            x.untyped_storage().resize_(again.numel() * again.element_size())
            x.set_(again)
        with torch.enable_grad():
            leaf = x.detach().requires_grad_(True)
            grads = torch.autograd.grad(block.coupled(leaf), (leaf, *ctx.weights), grad_y)
        grad_x, *grad_w = grads
        return (None, grad_x, *(g * block.weight_factor for g in grad_w))


class FreeingRevBlock(RevBlock):
    def forward(self, x):
        return FreeingInvertible.apply(self, x, *self.parameters())


class FreeingRevBlockBug(FreeingRevBlock):
    weight_factor = 1.5
