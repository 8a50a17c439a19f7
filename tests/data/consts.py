"""Targets that take data besides their variables: class indices and a mask (for --const)."""

import torch
import torch.nn.functional as F


def classify(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    assert target.dtype == torch.int64, target.dtype  # indices arrive as integers
    return F.cross_entropy(logits, target)


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (x * mask).sum() / mask.sum()
