"""A model for benchmarks/distributed.py --fsdp: a stack of MLP blocks under FSDP2
(`fully_shard` per block and root), each rank on its slice of the batch; its size from
GRADSCOPE_FSDP_WIDTH (the hidden width; 4 blocks of width × width · 4 weights each)."""

import os

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

WIDTH = int(os.environ.get("GRADSCOPE_FSDP_WIDTH", "256"))


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.up, self.down = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x):
        return x + self.down(torch.tanh(self.up(x)))


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.blocks = nn.ModuleList([Block(WIDTH) for _ in range(4)])
        self.head = nn.Linear(WIDTH, 1)
        mesh = init_device_mesh("cpu", (dist.get_world_size(),))
        for block in self.blocks:
            fully_shard(block, mesh=mesh)
        fully_shard(self, mesh=mesh)

    def forward(self, x):
        x = x[dist.get_rank()::dist.get_world_size()]
        for block in self.blocks:
            x = block(x)
        return self.head(x).pow(2).mean()
