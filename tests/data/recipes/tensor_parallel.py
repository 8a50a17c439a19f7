"""DTensor tensor and sequence parallelism through `parallelize_module`, as torch's tutorial
and torchtitan write them: a pre-norm MLP block (LayerNorm, up projection ColwiseParallel,
GELU, down projection RowwiseParallel) on a 1-D CPU mesh; a sequence-parallel variant (the norm
under SequenceParallel, the rows of the sequence split over the ranks). Each right, and with a
planted bug: a hand-written activation Function whose backward is off by 10 % on the shards;
a fused norm kernel left out of the sequence-parallel plan (its weight's gradient stays each
rank's rows' part, never reduced)."""

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)


class Gelu(torch.autograd.Function):
    """A fused tanh-GELU with its own backward (as a kernel would have)."""

    scale = 1.0

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.nn.functional.gelu(x, approximate="tanh")

    @classmethod
    def _grad(cls, x):
        c = (2 / torch.pi) ** 0.5
        t = torch.tanh(c * (x + 0.044715 * x ** 3))
        return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x * x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * Gelu._grad(x) * Gelu.scale


class GeluOff(Gelu):
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * Gelu._grad(x) * 1.1


class Block(nn.Module):
    """LayerNorm → up (ColwiseParallel) → GELU on each rank's columns → down (RowwiseParallel):
    the output is whole and the same on every rank."""

    act = Gelu

    def __init__(self, dim=8, hidden=16):
        super().__init__()
        torch.manual_seed(0)
        self.norm = nn.LayerNorm(dim, dtype=torch.float64)
        self.up = nn.Linear(dim, hidden, dtype=torch.float64)
        self.down = nn.Linear(hidden, dim, dtype=torch.float64)
        mesh = init_device_mesh("cpu", (dist.get_world_size(),))
        parallelize_module(self, mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})

    def forward(self, x):
        return self.down(self.act.apply(self.up(self.norm(x))))


class BlockGeluOff(Block):
    act = GeluOff


def block_loss(x):
    """A training step's loss over the block (built once, at import: the ranks import this
    file with their process group up)."""
    return (BLOCK(x) ** 2).mean()


class SequenceParallelBlock(nn.Module):
    """The norm under SequenceParallel (each rank its rows of the sequence, dim 1), up taking
    the rows gathered, down handing each rank its rows back: each rank's output is its rows'
    part of the loss."""

    def __init__(self, dim=8, hidden=16):
        super().__init__()
        torch.manual_seed(1)
        self.norm = self._norm(dim)
        self.up = nn.Linear(dim, hidden, dtype=torch.float64)
        self.down = nn.Linear(hidden, dim, dtype=torch.float64)
        mesh = init_device_mesh("cpu", (dist.get_world_size(),))
        plan = {"up": ColwiseParallel(input_layouts=Shard(1)),
                "down": RowwiseParallel(output_layouts=Shard(1))}
        if isinstance(self.norm, nn.LayerNorm):
            plan["norm"] = SequenceParallel()
        parallelize_module(self, mesh, plan)

    def _norm(self, dim):
        return nn.LayerNorm(dim, dtype=torch.float64)

    def forward(self, x):
        return self.down(torch.tanh(self.up(self.norm(x)))).sum()


class RMSNorm(torch.autograd.Function):
    """A fused RMSNorm kernel's Function (weight w): right for the rows it is given."""

    @staticmethod
    def forward(ctx, x, w):
        r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
        ctx.save_for_backward(x, w, r)
        return x * r * w

    @staticmethod
    def backward(ctx, g):
        x, w, r = ctx.saved_tensors
        gx = g * w
        dx = r * gx - x * r ** 3 * (gx * x).mean(-1, keepdim=True)
        return dx, (g * x * r).sum(dim=tuple(range(g.dim() - 1)))


class FusedRMSNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim, dtype=torch.float64))

    def forward(self, x):
        return RMSNorm.apply(x, self.weight)


class SequenceParallelFusedNorm(SequenceParallelBlock):
    """The bug: a fused norm kernel left out of the plan (it runs on each rank's rows with a
    plain weight): the weight's gradient is each rank's rows' part, never reduced."""

    def _norm(self, dim):
        return FusedRMSNorm(dim)


BLOCK = Block() if dist.is_available() and dist.is_initialized() else None
