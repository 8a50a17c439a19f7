"""A language model's head under tensor parallelism with its loss computed on sharded logits:
the head ColwiseParallel with `Shard(-1)` logits kept as a DTensor (`use_local_output=False`),
cross-entropy under `loss_parallel()` (checked with `--context loss_parallel`), as torchtitan
does. Wrong: the loss scaled in backward by a hand-written gradient-scaling Function that divides
by the world size (a mean where the sum belongs)."""

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import ColwiseParallel, loss_parallel, parallelize_module

__all__ = ["loss_parallel"]  # (for --context)

TARGETS = torch.tensor([1, 3, 6, 0, 7])


class ScaleGrad(torch.autograd.Function):
    """Identity forward; backward scales by `factor` (a loss scaler's unscale)."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return g


class MeanWhereSumBelongs(ScaleGrad):
    @staticmethod
    def backward(ctx, g):
        return g / dist.get_world_size()


class Head(nn.Module):
    scale = ScaleGrad

    def __init__(self, dim=4, vocab=8):
        super().__init__()
        torch.manual_seed(3)
        self.proj = nn.Linear(dim, dim, dtype=torch.float64)
        self.out = nn.Linear(dim, vocab, bias=False, dtype=torch.float64)
        mesh = init_device_mesh("cpu", (dist.get_world_size(),))
        parallelize_module(self, mesh, {"out": ColwiseParallel(
            input_layouts=Replicate(), output_layouts=Shard(-1), use_local_output=False)})

    def forward(self, x):
        logits = self.out(torch.tanh(self.scale.apply(self.proj(x))))
        return torch.nn.functional.cross_entropy(logits, TARGETS[:x.shape[0]])


class HeadMeanWhereSumBelongs(Head):
    scale = MeanWhereSumBelongs
