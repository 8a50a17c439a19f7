"""Distributed code of the kinds people write, checked with --nproc 2 (gloo, CPU): Megatron-
style tensor-parallel regions (identity forward and all-reduce backward, or the reverse) in a
column/row-parallel MLP, and a DDP model — each correct, and with a planted collective bug."""

import contextlib

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.tensor.parallel import loss_parallel  # noqa: F401  (for --context)
from torch.nn.parallel import DistributedDataParallel as DDP


class CopyToTensorParallel(torch.autograd.Function):
    """Megatron's `f`: identity forward, all-reduce of the gradient in backward."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        g = g.clone()
        dist.all_reduce(g)
        return g


class CopyForgetsAllReduce(CopyToTensorParallel):
    """The bug: an identity backward where the all-reduce belongs (each rank keeps its part)."""

    @staticmethod
    def backward(ctx, g):
        return g


class CopyReducesTwice(CopyToTensorParallel):
    """The bug: the gradient all-reduced twice (× world size)."""

    @staticmethod
    def backward(ctx, g):
        g = g.clone()
        dist.all_reduce(g)
        dist.all_reduce(g)
        return g


class CopyAveragesGradient(CopyToTensorParallel):
    """The bug: the mean over ranks where the sum belongs (× 1 / world size)."""

    @staticmethod
    def backward(ctx, g):
        g = g.clone()
        dist.all_reduce(g)
        return g / dist.get_world_size()


class ReduceFromTensorParallel(torch.autograd.Function):
    """Megatron's `g`: all-reduce forward, identity backward."""

    @staticmethod
    def forward(ctx, x):
        x = x.clone()
        dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g


class ParallelMLP(nn.Module):
    """fc1 split by columns, fc2 by rows over the ranks: the output is reduced to the whole."""

    copy = CopyToTensorParallel

    def __init__(self, features=4, hidden=8):
        super().__init__()
        world, rank = dist.get_world_size(), dist.get_rank()
        torch.manual_seed(1234 + rank)  # each rank's shard differs
        self.fc1 = nn.Linear(features, hidden // world, dtype=torch.float64)
        self.fc2 = nn.Linear(hidden // world, features, bias=False, dtype=torch.float64)

    def forward(self, x):
        h = torch.tanh(self.fc1(self.copy.apply(x)))
        return ReduceFromTensorParallel.apply(self.fc2(h))


class MLPForgetsAllReduce(ParallelMLP):
    copy = CopyForgetsAllReduce


class MLPReducesTwice(ParallelMLP):
    copy = CopyReducesTwice


class MLPAveragesGradient(ParallelMLP):
    copy = CopyAveragesGradient


class DataParallel(nn.Module):
    """A small model under DDP: its parameters are the same on every rank, its gradients
    all-reduced (averaged) by DDP's hooks during backward."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(7)
        net = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).double()
        self.ddp = DDP(net)

    def forward(self, x):
        return self.ddp(x)


class DataParallelDoubleReduce(DataParallel):
    """The bug: the loss all-reduced in place after DDP averaged (autograd never sees it, so
    the gradients are half of what the reported value changes by at 2 ranks)."""

    def forward(self, x):
        y = self.ddp(x)
        total = y.detach().clone()
        dist.all_reduce(total)
        return y + (total - y.detach())


def rank_scaled(x):
    """A function whose backward is right on rank 0 and doubled on rank 1 (a wrong split)."""
    return RankScaled.apply(x)


class RankScaled(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 3

    @staticmethod
    def backward(ctx, g):
        return g * (3 if dist.get_rank() == 0 else 6)


def raises_on_rank_one(x):
    if dist.get_rank() == 1:
        raise ValueError("rank one refuses")
    return x * 2


class TensorParallelBlock(nn.Module):
    """DTensor tensor parallelism: `up` split by columns, `down` by rows over a CPU mesh."""

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


class GatherFromParallel(torch.autograd.Function):
    """All-gather along the last dim (each rank's columns into the whole); backward keeps
    this rank's slice."""

    @staticmethod
    def forward(ctx, x):
        parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, x.contiguous())
        return torch.cat(parts, dim=-1)

    @staticmethod
    def backward(ctx, g):
        n = g.shape[-1] // dist.get_world_size()
        rank = dist.get_rank()
        return g[..., rank * n:(rank + 1) * n].contiguous()


class GatherWrongSplit(GatherFromParallel):
    """The bug: every rank keeps the first slice (a wrong split in the gather's backward)."""

    @staticmethod
    def backward(ctx, g):
        n = g.shape[-1] // dist.get_world_size()
        return g[..., :n].contiguous()


class ColumnParallelLinear(nn.Module):
    """A linear layer split by output columns, its output gathered on every rank."""

    gather = GatherFromParallel

    def __init__(self):
        super().__init__()
        torch.manual_seed(99 + dist.get_rank())
        self.fc = nn.Linear(3, 4 // dist.get_world_size(), dtype=torch.float64)

    def forward(self, x):
        return torch.tanh(self.gather.apply(self.fc(CopyToTensorParallel.apply(x))))


class ColumnParallelWrongSplit(ColumnParallelLinear):
    gather = GatherWrongSplit


class ColumnParallelNoCopy(ColumnParallelLinear):
    """The bug Megatron's copy region exists for: x feeds every rank's columns, and without
    the all-reduce in backward each rank keeps only its columns' part of x's gradient."""

    def forward(self, x):
        return torch.tanh(self.gather.apply(self.fc(x)))


def hangs_on_rank_zero(x):
    """Rank 0 waits in a collective rank 1 never joins."""
    if dist.get_rank() == 0:
        x = x.clone()
        dist.all_reduce(x)
    return x * 2


class FullySharded(nn.Module):
    """FSDP2: every Linear and the whole net under fully_shard on a CPU mesh."""

    def __init__(self):
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2)).double()
        mesh = init_device_mesh("cpu", (dist.get_world_size(),))
        for layer in self.net:
            if isinstance(layer, nn.Linear):
                fully_shard(layer, mesh=mesh)
        fully_shard(self.net, mesh=mesh)

    def forward(self, x):
        return self.net(x)


_inside = []


@contextlib.contextmanager
def doubled_region():
    """A context the backward below needs (as loss_parallel() is needed by a parallel loss)."""
    _inside.append(True)
    try:
        yield
    finally:
        _inside.pop()


class NeedsRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        if not _inside:
            raise RuntimeError("backward outside doubled_region()")
        return g * 2


def needs_region(x):
    return NeedsRegion.apply(x)


_meshes = []


def _mesh():
    from torch.distributed.device_mesh import init_device_mesh

    if not _meshes:
        _meshes.append(init_device_mesh("cpu", (dist.get_world_size(),)))
    return _meshes[0]


def parallel_cross_entropy(logits):
    """Each rank's columns of the logits (a ColwiseParallel output, --sharded logits), the
    loss over all of them: under loss_parallel() (--context loss_parallel) as its docs say."""
    from torch.distributed.tensor import DTensor, Shard

    d = DTensor.from_local(logits, _mesh(), [Shard(1)])
    return torch.nn.functional.cross_entropy(d, torch.tensor([1, 3, 6]))


def parallel_log_softmax(logits):
    """log_softmax of sharded logits not consumed by cross_entropy: under loss_parallel() its
    gradient is wrong (pytorch #190746, open on 2.13); without the context it is right."""
    from torch.distributed.tensor import DTensor, Shard

    d = DTensor.from_local(logits, _mesh(), [Shard(1)])
    y = torch.nn.functional.log_softmax(d, dim=-1)
    columns = logits.shape[1]
    weight = torch.arange(1.0, 1.0 + columns, dtype=logits.dtype) * (1 + dist.get_rank())
    return (y * DTensor.from_local(weight, _mesh(), [Shard(0)])).sum().full_tensor()



def prints_on_every_rank(x):
    print("hello from rank", dist.get_rank())
    return x * 2


def functional_all_reduce_avg(x):
    """A functional all_reduce with "avg" (pytorch #190007): its backward raises on 2.13."""
    import torch.distributed._functional_collectives as fc

    return fc.all_reduce(x * 1.0, "avg", dist.group.WORLD)


class ScatterRows(torch.autograd.Function):
    """Megatron's scatter to the sequence-parallel region: each rank keeps its rows; backward
    all-gathers the rows' gradients."""

    @staticmethod
    def forward(ctx, x):
        n = x.shape[0] // dist.get_world_size()
        rank = dist.get_rank()
        return x[rank * n:(rank + 1) * n].clone()

    @staticmethod
    def backward(ctx, g):
        parts = [torch.empty_like(g) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, g.contiguous())
        return torch.cat(parts)


class GatherRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, x.contiguous())
        return torch.cat(parts)

    @staticmethod
    def backward(ctx, g):
        n = g.shape[0] // dist.get_world_size()
        rank = dist.get_rank()
        return g[rank * n:(rank + 1) * n].contiguous()


class SequenceParallelNorm(nn.Module):
    """A norm's weight shared by every rank, each rank normalising its own rows: each rank's
    weight.grad is its rows' part, completed after backward (finalize_grads) as Megatron's
    finalize_model_grads does for sequence-parallel norms."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.weight = nn.Parameter(1 + 0.1 * torch.randn(4, dtype=torch.float64))

    def forward(self, x):
        rows = ScatterRows.apply(x)
        normed = torch.nn.functional.layer_norm(rows, (4,)) * self.weight
        return GatherRows.apply(normed)


def finalize_grads(module):
    """All-reduce the partial gradients of the shared norm weight (after backward)."""
    for p in module.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad)


class ReduceAverages(torch.autograd.Function):
    """The bug: the partial outputs averaged (a mean where the sum belongs), and backward
    consistent with it — the gradient follows the wrong function, so only a single-process
    run shows it (--compare-single)."""

    @staticmethod
    def forward(ctx, x):
        x = x.clone()
        dist.all_reduce(x)
        return x / dist.get_world_size()

    @staticmethod
    def backward(ctx, g):
        return g / dist.get_world_size()


class SplitMLP(nn.Module):
    """A tensor-parallel MLP whose shards are slices of one seeded whole (Megatron's init
    from a master weight, tensor_model_parallel and partition_dim set): at world size 1 it is
    the whole MLP."""

    reduce = ReduceFromTensorParallel

    def __init__(self):
        super().__init__()
        torch.manual_seed(5)
        up, down = nn.Linear(4, 8).double(), nn.Linear(8, 4, bias=False).double()
        world, rank = dist.get_world_size(), dist.get_rank()
        rows = slice(rank * 8 // world, (rank + 1) * 8 // world)
        self.w1 = self._shard(up.weight[rows], 0)
        self.b1 = self._shard(up.bias[rows], 0)
        self.w2 = self._shard(down.weight[:, rows], 1)

    @staticmethod
    def _shard(t, dim):
        p = nn.Parameter(t.detach().clone())
        p.tensor_model_parallel, p.partition_dim = True, dim
        return p

    def forward(self, x):
        x = CopyToTensorParallel.apply(x)
        h = torch.tanh(torch.nn.functional.linear(x, self.w1, self.b1))
        return self.reduce.apply(torch.nn.functional.linear(h, self.w2))


class SplitMLPAveraged(SplitMLP):
    reduce = ReduceAverages


class GatherForTensorParallel(torch.autograd.Function):
    """Megatron's gather from the sequence-parallel region into a tensor-parallel layer: rows
    all-gathered; the backward reduce-scatters (every rank's columns used all the rows, so each
    rank's rows get the sum of the ranks' gradients — all-reduce, then this rank's rows, as
    gloo has no reduce_scatter)."""

    @staticmethod
    def forward(ctx, x):
        parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, x.contiguous())
        return torch.cat(parts)

    @staticmethod
    def backward(ctx, g):
        g = g.clone()
        dist.all_reduce(g)
        n = g.shape[0] // dist.get_world_size()
        rank = dist.get_rank()
        return g[rank * n:(rank + 1) * n].contiguous()


class GatherWithoutReduceScatter(GatherForTensorParallel):
    """The bug: each rank slices its rows out of its own gradient (no reduction)."""

    @staticmethod
    def backward(ctx, g):
        n = g.shape[0] // dist.get_world_size()
        rank = dist.get_rank()
        return g[rank * n:(rank + 1) * n].contiguous()


class SequenceParallelMLP(nn.Module):
    """Rows of x split over the ranks (sequence parallel), gathered into a column/row-parallel
    MLP whose output is reduced."""

    gather = GatherForTensorParallel

    def __init__(self):
        super().__init__()
        torch.manual_seed(31 + dist.get_rank())
        self.fc1 = nn.Linear(4, 8 // dist.get_world_size(), dtype=torch.float64)
        self.fc2 = nn.Linear(8 // dist.get_world_size(), 4, bias=False, dtype=torch.float64)

    def forward(self, x):
        rows = ScatterRows.apply(x)
        h = torch.tanh(self.fc1(self.gather.apply(rows)))
        return ReduceFromTensorParallel.apply(self.fc2(h))


class SequenceParallelMissingReduceScatter(SequenceParallelMLP):
    gather = GatherWithoutReduceScatter


# a training-style function over a tensor-parallel block built at import (the ranks import
# this file once their process group is up): its parameters are DTensors, which must reach
# the block as DTensors — written in place, never swapped for plain tensors
TP_BLOCK = TensorParallelBlock() if dist.is_available() and dist.is_initialized() else None


def tp_block_loss(x):
    return (TP_BLOCK(x) ** 2).sum()


_SLEEPERS: list = []


def forks_a_sleeper(x):
    """Leaves a child process behind on every rank (a data loader's worker, say): a file
    named by the environment gets its pid."""
    import os
    import subprocess
    import sys

    if not _SLEEPERS:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        _SLEEPERS.append(child)
        with open(os.environ["GRADSCOPE_TEST_SLEEPERS"], "a") as handle:
            handle.write(f"{child.pid}\n")
    return x * 2


def sleeps_on_every_rank(x):
    """Every rank stuck in its own code (no collective whose peer's death would end it)."""
    import time

    time.sleep(600)
    return x * 2


def starts_a_session(x):
    """Leaves a child behind in a session of its own (no process group of the rank's holds
    it): a file named by the environment gets its pid."""
    import os
    import subprocess
    import sys

    if not _SLEEPERS:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                                 start_new_session=True)
        _SLEEPERS.append(child)
        with open(os.environ["GRADSCOPE_TEST_SLEEPERS"], "a") as handle:
            handle.write(f"{child.pid}\n")
    return x * 2


def dies_on_rank_one(x):
    """Rank 1's process is killed outright (a segfault, the OOM killer)."""
    import os
    import signal

    if dist.get_rank() == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    return x * 2
