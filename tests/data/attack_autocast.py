"""--autocast targets of the fifth attack: overflow in float16, integer outputs
(benchmarks/attack_modern.py writes this file)."""

import torch


def overflows(x):
    return (x @ x.T * 1e5).sum(-1)  # past float16's range under autocast

def big(x):
    return torch.exp(x * 20) @ torch.ones(x.shape[-1], 2)

def ints(x):
    return (x @ x.T).long()

def mixed(x):
    return (x.half() @ x.T.half()).float().sum(-1)

class Linear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.lin(x).tanh()

def matmul(x):
    return (x @ x.T).tanh()
