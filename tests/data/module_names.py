"""Functions over modules whose global names are what every nn.Module already has as an
attribute (`training`, `forward`) or what gradscope's own holder once used (`fn`)."""

import torch
from torch import nn

torch.manual_seed(0)
fn = nn.Linear(3, 2).double()
training = nn.Linear(2, 1).double()


def loss(x):
    return training(torch.tanh(fn(x))).sum()
