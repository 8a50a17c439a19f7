"""A user's test that calls gradcheck on a function taking seconds (tests/e2e/test_signals.py
stops `pytest --gradscope` on it mid-way)."""

import torch


def slow(x):
    y = x
    for _ in range(400):
        y = torch.sin(y) @ torch.ones(y.shape[-1], y.shape[-1], dtype=y.dtype) / y.shape[-1]
    return y.sum()


def test_slow():
    x = torch.randn(3000, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(slow, (x,))
