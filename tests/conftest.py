"""Shared test helpers."""

from __future__ import annotations

import torch


def assert_close(actual, expected, rel: float = 1e-8, abs_: float = 1e-12) -> None:
    """Nested lists (or numbers) equal in shape and close in value."""
    a = torch.tensor(actual, dtype=torch.float64)
    e = torch.tensor(expected, dtype=torch.float64)
    assert a.shape == e.shape, f"shape {tuple(a.shape)} != {tuple(e.shape)}"
    assert torch.allclose(a, e, rtol=rel, atol=abs_), f"{actual} != {expected}"
