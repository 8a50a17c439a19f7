"""Distributed code for `gradscope check FILE.py:NAME --nproc 2` (docs/distributed.md):
a Megatron-style tensor-parallel MLP (and the same MLP whose copy region forgets its
all-reduce), a model under DDP, and DTensor tensor parallelism. Each rank imports this file
after its process group exists, as under torchrun."""

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


class CopyToParallel(torch.autograd.Function):
    """Identity forward; backward all-reduces: x is used by every rank's shard."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        g = g.clone()
        dist.all_reduce(g)
        return g


class CopyWithoutAllReduce(CopyToParallel):
    @staticmethod
    def backward(ctx, g):
        return g  # the bug: each rank keeps only its part of x's gradient


class ReduceFromParallel(torch.autograd.Function):
    """All-reduce forward (the shards' partial outputs summed); identity backward."""

    @staticmethod
    def forward(ctx, x):
        x = x.clone()
        dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g


class ParallelMLP(nn.Module):
    copy = CopyToParallel

    def __init__(self, features=4, hidden=8):
        super().__init__()
        torch.manual_seed(dist.get_rank())  # each rank's shards are its own
        world = dist.get_world_size()
        self.fc1 = nn.Linear(features, hidden // world, dtype=torch.float64)
        self.fc2 = nn.Linear(hidden // world, features, bias=False, dtype=torch.float64)

    def forward(self, x):
        h = torch.tanh(self.fc1(self.copy.apply(x)))
        return ReduceFromParallel.apply(self.fc2(h))


class BuggyParallelMLP(ParallelMLP):
    copy = CopyWithoutAllReduce


class DataParallel(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)  # DDP starts every rank from rank 0's parameters anyway
        self.ddp = DDP(nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).double())

    def forward(self, x):
        return self.ddp(x)


class TensorParallel(nn.Module):
    def __init__(self):
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor.parallel import (
            ColwiseParallel,
            RowwiseParallel,
            parallelize_module,
        )

        super().__init__()
        torch.manual_seed(0)
        self.up = nn.Linear(4, 8, dtype=torch.float64)
        self.down = nn.Linear(8, 4, dtype=torch.float64)
        mesh = init_device_mesh("cpu", (dist.get_world_size(),))
        parallelize_module(self, mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})

    def forward(self, x):
        return self.down(torch.tanh(self.up(x)))
