"""A real reversible graph-network block — torch_geometric's GroupAddRev, whose Function
(InvertibleFunction) frees its input's memory, recomputes it with the inverse in backward and
re-runs the group's convolutions there, differentiating with respect to the parameters it was
handed — checked through gradscope beside torch's gradcheck: right as torch_geometric ships
it, and with a planted bug (its backward scales the parameters' gradients by 1.5). Before
parameters were held through backward, gradscope exited 3 on the right block ("the target's own
code raised during backward") and missed the planted one; before every call got inputs of its
own storage, its watched forward read the freed input (a segmentation fault).

    pip install torch_geometric==2.6.1
    python benchmarks/reversible.py

Prints one JSON row per case: gradscope's exit verdict and seconds, torch's gradcheck's."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
TARGET = HERE / "reversible_target.py"

SOURCE = '''
import torch
from torch_geometric.nn import GraphConv, GroupAddRev
from torch_geometric.nn.models import rev_gnn

torch.manual_seed(0)
EDGES = torch.tensor([[0, 1, 1, 2, 3, 0], [1, 0, 2, 1, 0, 3]])
BLOCK = GroupAddRev(GraphConv(2, 2), num_groups=2, num_bwd_passes=8).double()
# as shipped: one backward per forward (torch's gradcheck needs 8: it backpropagates a graph
# again; gradscope re-runs the forward where a graph refuses)
ONCE = GroupAddRev(GraphConv(2, 2), num_groups=2).double()


def rev_gnn_loss(x):
    return BLOCK(x, EDGES).tanh().sum()


def rev_gnn_once(x):
    return ONCE(x, EDGES).tanh().sum()


def planted(factor):
    """InvertibleFunction.backward with the weights' gradients scaled (None: as shipped)."""
    cls = rev_gnn.InvertibleFunction
    original = cls.__dict__["backward"]
    if factor is None:
        return
    def backward(ctx, *grads):
        out = original.__func__(ctx, *grads)
        k = 4 + ctx.num_inputs
        return (*out[:k], *(None if g is None else g * factor for g in out[k:]))
    cls.backward = staticmethod(backward)
'''


def main() -> None:
    TARGET.write_text(SOURCE)
    sys.path.insert(0, str(HERE))
    import reversible_target as t

    import gradscope

    for name, factor in (("as shipped", None), ("planted 1.5x", 1.5)):
        t.planted(factor)
        x = torch.randn(4, 4, dtype=torch.float64)
        tic = time.perf_counter()
        report = gradscope.check(f"{TARGET}:rev_gnn_loss", at={"x": x})
        ours = time.perf_counter() - tic
        tic = time.perf_counter()
        try:
            theirs = torch.autograd.gradcheck(
                lambda x, *ps: t.rev_gnn_loss(x.clone()),  # (it frees its input)
                (x.clone().requires_grad_(), *t.BLOCK.parameters()), raise_exception=False)
        except Exception as exc:  # (torch's own call of it raising)
            theirs = f"raised {type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
        once = gradscope.check(f"{TARGET}:rev_gnn_once", at={"x": x})
        print(json.dumps({"case": name, "gradscope_passed": report.passed,
                          "gradscope_passed_num_bwd_passes_1": once.passed,
                          "gradscope_s": round(ours, 2), "gradcheck": theirs,
                          "gradcheck_s": round(time.perf_counter() - tic, 2),
                          "wrong": [i.name for i in report.inputs if i.status == "mismatch"]}))
    TARGET.unlink()


if __name__ == "__main__":
    main()
