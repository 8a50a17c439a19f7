"""DistributedDataParallel as training loops use it, each rank on its own slice of the batch
(x is the global batch; rank r takes rows r, r+world, …): plain; gradient accumulation over
two micro-batches (the first under `no_sync()`, the last synced);
`find_unused_parameters=True` with a task head per rank. Each right, and with a planted bug:
every micro-batch under no_sync (nothing is ever all-reduced: each rank steps on its own
gradient); a backward hook that scales the gradient on rank 1 only."""

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def _net(seed=7):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).double()


def _mine(x):
    return x[dist.get_rank()::dist.get_world_size()]


class Plain(nn.Module):
    def __init__(self):
        super().__init__()
        self.ddp = DDP(_net())

    def forward(self, x):
        return (self.ddp(_mine(x)) ** 2).mean()


class HookScalesOnRankOne(Plain):
    """The bug: a gradient hook (a clipping helper, say) that runs on rank 1 only."""

    def __init__(self):
        super().__init__()
        if dist.get_rank() == 1:
            first = next(self.ddp.module.parameters())
            first.register_hook(lambda g: g * 2)


class Accumulated(nn.Module):
    """Two micro-batches in one step: the first's forward under no_sync (its gradient is
    accumulated, not reduced), the last's outside it (the backward all-reduces the sum)."""

    sync_last = True

    def __init__(self):
        super().__init__()
        self.ddp = DDP(_net(8))

    def forward(self, x):
        first, second = _mine(x).chunk(2)
        with self.ddp.no_sync():
            loss = (self.ddp(first) ** 2).mean() / 2
        if self.sync_last:
            return loss + (self.ddp(second) ** 2).mean() / 2
        with self.ddp.no_sync():  # (the bug: the last micro-batch under no_sync too)
            return loss + (self.ddp(second) ** 2).mean() / 2


class AccumulatedNeverSynced(Accumulated):
    sync_last = False


class HeadPerRank(nn.Module):
    """A shared trunk and one head per task, each rank training its own task's head:
    find_unused_parameters=True (the other heads get no gradient on that rank)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(9)
        net = nn.ModuleDict({"trunk": nn.Linear(3, 4), "heads": nn.ModuleList(
            [nn.Linear(4, 1) for _ in range(dist.get_world_size())])}).double()
        self.ddp = DDP(_Tasks(net), find_unused_parameters=True)

    def forward(self, x):
        return self.ddp(_mine(x)).pow(2).mean()


class _Tasks(nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        h = torch.tanh(self.net["trunk"](x))
        return self.net["heads"][dist.get_rank()](h)
