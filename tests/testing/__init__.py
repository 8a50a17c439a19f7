"""Tests of gradscope.testing; `leaf` is the seeded float64 input they all check at."""

from __future__ import annotations

import torch


def leaf(*shape: int, seed: int = 0) -> torch.Tensor:
    """A seeded float64 tensor that requires grad."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen, dtype=torch.float64).requires_grad_(True)
