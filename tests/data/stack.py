"""A hand-written pre-norm transformer stack (float32, as real models are) and training-style
losses over it: the model-scale targets of the model report."""

import math

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, dim: int = 32, heads: int = 4, hidden: int = 64) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).reshape(b, t, 3, self.heads, d // self.heads).unbind(2)
        q, k, v = (z.transpose(1, 2) for z in (q, k, v))
        weights = (q @ k.transpose(-1, -2) / math.sqrt(d // self.heads)).softmax(-1)
        return self.proj((weights @ v).transpose(1, 2).reshape(b, t, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.norm1(x))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class Stack(nn.Module):
    def __init__(self, depth: int = 4, dim: int = 32) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(dim) for _ in range(depth))
        self.norm = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.norm(x)


torch.manual_seed(0)
stack = Stack()


def loss(x: torch.Tensor) -> torch.Tensor:
    return stack(x).pow(2).mean()


class TypoGELU(torch.autograd.Function):
    """GELU with a typo in its backward: the Gaussian density lost its 1/2 in the exponent.
    Written in the functorch style (setup_context, generate_vmap_rule) so that its forward can
    be vmapped; an old-style Function (ctx in forward) is differenced one column at a time."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        cdf = 0.5 * (1 + torch.erf(x / math.sqrt(2)))
        pdf = torch.exp(-x * x) / math.sqrt(2 * math.pi)  # typo: should be -x * x / 2
        return grad * (cdf + x * pdf)


class TypoBlock(Block):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.norm1(x))
        return x + self.fc2(TypoGELU.apply(self.fc1(self.norm2(x))))


class QuantBlock(Block):
    def forward(self, x: torch.Tensor) -> torch.Tensor:  # fake-quantized with a bare round
        x = x + self.attention(self.norm1(x))
        return x + self.fc2(torch.round(F.gelu(self.fc1(self.norm2(x))) * 8) / 8)


torch.manual_seed(0)
typo_stack = Stack()
typo_stack.blocks[2] = TypoBlock()
quant_stack = Stack(depth=2)
quant_stack.blocks[1] = QuantBlock()


def typo_loss(x: torch.Tensor) -> torch.Tensor:
    return typo_stack(x).pow(2).mean()


def quant_loss(x: torch.Tensor) -> torch.Tensor:
    return quant_stack(x).pow(2).mean()


# Small versions for the test suite (the same structure, a few seconds less each).
torch.manual_seed(1)
small = Stack(depth=3, dim=16)
small_typo = Stack(depth=3, dim=16)
small_typo.blocks[1] = TypoBlock(16)


def small_loss(x: torch.Tensor) -> torch.Tensor:
    return small(x).pow(2).mean()


def small_typo_loss(x: torch.Tensor) -> torch.Tensor:
    return small_typo(x).pow(2).mean()


class Gated(nn.Module):
    """A stack whose second block's MLP output is scaled by 1e-6 before its first layer's
    weights see a gradient: that block's fc1 barely learns."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = Stack(depth=2, dim=16)
        self.inner.blocks[1].fc2.weight.data.mul_(1e-6)  # gradients into fc1 shrink with it
        self.inner.blocks[1].fc2.bias.data.zero_()


torch.manual_seed(2)
gated = Gated()


def gated_loss(x: torch.Tensor) -> torch.Tensor:
    return gated.inner(x).pow(2).mean()


torch.manual_seed(4)
small_quant = Stack(depth=2, dim=16)
small_quant.blocks[1] = QuantBlock(16)


def small_quant_loss(x: torch.Tensor) -> torch.Tensor:
    return small_quant(x).pow(2).mean()


class DefinedLate(nn.Module):
    """Its blocks are defined in the opposite order to the one its forward runs them in: the
    typo'd block is defined first but runs last."""

    def __init__(self) -> None:
        super().__init__()
        self.late = TypoBlock(16)
        self.early = Block(16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.late(self.early(x))


torch.manual_seed(5)
defined_late = DefinedLate()


def defined_late_loss(x: torch.Tensor) -> torch.Tensor:
    return defined_late(x).pow(2).mean()


class OldTypoGELU(torch.autograd.Function):
    """The same typo, written the old way (ctx in forward), as most real code is."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return F.gelu(x)

    backward = staticmethod(TypoGELU.backward)  # the same typo


class OldTypoBlock(Block):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.norm1(x))
        return x + self.fc2(OldTypoGELU.apply(self.fc1(self.norm2(x))))


torch.manual_seed(1)
small_old_typo = Stack(depth=3, dim=16)
small_old_typo.blocks[1] = OldTypoBlock(16)


def small_old_typo_loss(x: torch.Tensor) -> torch.Tensor:
    return small_old_typo(x).pow(2).mean()
