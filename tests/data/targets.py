"""Targets that go wrong in the ways the bad-input catalogue (README "Errors") lists."""

import torch


def returns_tuple(x):
    return x * 2, x * 3


def returns_number(x):
    return 1.5


def forward_raises(x):
    return x.reshape(7, 7)


def detached(x):
    return x.detach() * 2


def exits(x):
    import sys

    sys.exit(0)


class ExitsInBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        raise SystemExit(0)


def prints(x):
    print("hello from the target")
    return x * 2



_first: dict[str, list[float]] = {}


def forward_raises_when_perturbed(x):
    """Evaluates at the point it was first called at, and refuses any other point (so
    finite differences, which move x, cannot run)."""
    point = x.detach().tolist()
    _first.setdefault("x", point)
    if point != _first["x"]:
        raise ValueError("refused: a point other than the first")
    return x * 3


class ComplexLayer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(3, dtype=torch.complex64))

    def forward(self, x):
        return (x * self.weight).real


class TwoLayers(torch.nn.Module):
    """An MLP whose first Linear tells the input shape (4 features)."""

    def __init__(self):
        super().__init__()
        self.first = torch.nn.Linear(4, 8)
        self.second = torch.nn.Linear(8, 2)

    def forward(self, x):
        return self.second(torch.tanh(self.first(x)))


def weighted_loss(x, labels=None, weights=None, scale: float = 1.0):
    """Optional arguments the way library models take them (`labels=None`): data when given
    with --const, inputs when given with --at, left at their defaults otherwise."""
    out = (x * x).sum(-1)
    if labels is not None:
        out = out - (x.gather(-1, labels.unsqueeze(-1)).squeeze(-1))
    if weights is not None:
        out = out * weights
    return out.sum() * scale
