"""FSDP2 (`fully_shard`) as torch's docs write it: every block, then the root, sharded over
the ranks; and on a 2-D mesh (data parallel × tensor parallel) with `parallelize_module` inside
each data-parallel replica (world size 4). Each rank on its own slice of the batch. Right, and
with a planted bug: a hand-written activation Function whose backward drops a term."""

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module


class Swish(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        return g * (s + x * s * (1 - s))


class SwishDropsATerm(Swish):
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * torch.sigmoid(x)


class MLP(nn.Module):
    def __init__(self, act, dim=4, hidden=8):
        super().__init__()
        self.up, self.down, self.act = nn.Linear(dim, hidden), nn.Linear(hidden, dim), act

    def forward(self, x):
        return x + self.down(self.act.apply(self.up(x)))


class Sharded(nn.Module):
    """Two blocks and a head, each block and the root under fully_shard."""

    act = Swish

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.blocks = nn.ModuleList([MLP(self.act), MLP(self.act)])
        self.head = nn.Linear(4, 1)
        self.double()
        mesh = init_device_mesh("cpu", (dist.get_world_size(),))
        for block in self.blocks:
            fully_shard(block, mesh=mesh)
        fully_shard(self, mesh=mesh)

    def forward(self, x):
        x = x[dist.get_rank()::dist.get_world_size()]
        for block in self.blocks:
            x = block(x)
        return self.head(x).pow(2).mean()


class ShardedSwishDropsATerm(Sharded):
    act = SwishDropsATerm


class ShardedAndParallel(nn.Module):
    """A 2-D mesh (dp × tp, 2 × 2): each block's up/down tensor parallel over tp, the blocks
    and the root fully_shard over dp; each dp replica on its own slice of the batch."""

    act = Swish

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.blocks = nn.ModuleList([MLP(self.act), MLP(self.act)])
        self.head = nn.Linear(4, 1)
        self.double()
        mesh = init_device_mesh("cpu", (2, dist.get_world_size() // 2),
                                mesh_dim_names=("dp", "tp"))
        for block in self.blocks:
            parallelize_module(block, mesh["tp"], {"up": ColwiseParallel(),
                                                   "down": RowwiseParallel()})
            fully_shard(block, mesh=mesh["dp"])
        fully_shard(self, mesh=mesh["dp"])
        self.dp = mesh["dp"]

    def forward(self, x):
        x = x[self.dp.get_local_rank()::self.dp.size()]
        for block in self.blocks:
            x = block(x)
        return self.head(x).pow(2).mean()


class ShardedAndParallelSwishDropsATerm(ShardedAndParallel):
    act = SwishDropsATerm
