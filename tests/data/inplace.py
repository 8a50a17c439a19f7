"""A custom Function inside a larger target, for the in-place checks: DANN's gradient
reversal (deliberate: −α·g) on x only, beside an ordinary term in y."""

import torch
from corpus import GradientReversal


def reversed_and_square(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return GradientReversal.apply(x, 0.5).sum() + (y * y).sum()


def reversed_by_hook(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Gradient reversal written as a hook (−g), on x only."""
    h = x * 2
    if h.requires_grad:
        h.register_hook(lambda g: -g)
    return h.sum() + (y * y).sum()


def logged(x: torch.Tensor) -> torch.Tensor:
    """A hook that only looks at the gradient (returns None), and one that returns it."""
    seen = []
    h = torch.tanh(x)
    if h.requires_grad:
        h.register_hook(seen.append)
        h.register_hook(lambda g: g.clone())
    return (h * h).sum()


def clipped(x: torch.Tensor) -> torch.Tensor:
    """A clipping hook: whether it changes anything depends on the gradient's size."""
    h = x * 3
    if h.requires_grad:
        h.register_hook(lambda g: g.clamp(-1, 1))
    return (h * h).sum()


def half_detached(x: torch.Tensor) -> torch.Tensor:
    """No Function, no hook: a `.detach()` that drops half of x²'s derivative."""
    return (x * x.detach()).sum()
