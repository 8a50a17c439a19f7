"""DTensor's `to_local()` and `from_local()` where code leaves DTensor for plain tensors and
comes back: mixture-of-experts computed on each rank's own experts (the input a replicated
DTensor, each rank's part of the output a partial sum). Right: `to_local(grad_placements=
[Partial()])` — each rank's gradient of the input is its experts' part, to be summed — and
`from_local(..., [Partial()])` then `redistribute` to replicate the sum. Wrong: the same without
`grad_placements` (the default, Replicate: the parts are never summed and every rank keeps its
own)."""

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor


class Experts(nn.Module):
    """Four experts, each rank holding its own (an expert-parallel layer): a replicated input
    routed to every expert with fixed weights, the experts' outputs summed over ranks."""

    grad_placements = (Partial(),)

    def __init__(self, dim=4, experts=4):
        super().__init__()
        torch.manual_seed(0)
        self.mesh = init_device_mesh("cpu", (dist.get_world_size(),))
        whole = torch.randn(experts, dim, dim, dtype=torch.float64) / dim ** 0.5
        self.weight = nn.Parameter(distribute_tensor(whole, self.mesh, [Shard(0)]))
        router = torch.randn(dim, experts, dtype=torch.float64)
        self.gate = nn.Parameter(distribute_tensor(router, self.mesh, [Replicate()]))

    def forward(self, x):
        world, rank = dist.get_world_size(), dist.get_rank()
        mine = self.weight.shape[0] // world
        rows = slice(rank * mine, (rank + 1) * mine)
        xd = DTensor.from_local(x, self.mesh, [Replicate()], run_check=False)
        gates = torch.softmax(xd @ self.gate, dim=-1)  # (tokens, experts), replicated
        # each rank computes with its own experts on plain tensors: the gradients of the
        # input and of the gates it takes are its part of theirs (Partial), to be summed
        local = xd.to_local(grad_placements=self.grad_placements)
        mine_gates = gates.to_local(grad_placements=self.grad_placements)[:, rows]
        w = self.weight.to_local()
        part = torch.einsum("td,edf,te->tf", local, w, mine_gates)
        total = DTensor.from_local(part, self.mesh, [Partial()])
        return torch.tanh(total.redistribute(self.mesh, [Replicate()]).to_local())


class ExpertsWithoutGradPlacements(Experts):
    grad_placements = None  # the default: Replicate, the parts never summed
