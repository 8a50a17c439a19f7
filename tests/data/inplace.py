"""A custom Function inside a larger target, for the in-place checks: DANN's gradient
reversal (deliberate: −α·g) on x only, beside an ordinary term in y."""

import torch
from corpus import GradientReversal


def reversed_and_square(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return GradientReversal.apply(x, 0.5).sum() + (y * y).sum()
