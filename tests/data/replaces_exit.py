"""A target whose module replaces sys.exit (run only in a subprocess: it would replace the
test process's own)."""

import sys

import torch

sys.exit = lambda *args: None


def wrong(x):
    return x * 2 + (x.detach() * 0.5)  # autograd 2, the function's derivative 2.5


class Nan(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * float("nan")


def nan_backward(x):
    return Nan.apply(x)


def raises(x):
    raise ValueError("the target's own error")
