"""Real-shaped code that gradscope's own shortcuts (a no-grad forward, a watched forward,
values-only evaluation, vmap batching) do not fit, each with a twin that has a real bug: the
plain way must check both, passing the first and failing the second."""

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


def hooked(x):
    """Registers a hook in its forward (needs grad mode and inputs that require grad)."""
    y = x * 3
    y.register_hook(lambda g: g)
    return y.sin()


def hooked_bug(x):
    y = x * 3
    y.register_hook(lambda g: 2 * g)  # the bug: the gradient doubled from here on
    return y.sin()


def uses_vmap(x):
    """torch.func.vmap inside the user's function (its batched tensors: nothing to read)."""
    return torch.func.vmap(lambda r: (r ** 2).sum())(x)


def uses_vmap_bug(x):
    return torch.func.vmap(lambda r: (r.detach() * r).sum())(x)  # the bug: half the gradient


class Leaky(nn.Module):
    """A stateful neuron: keeps its membrane between calls."""

    def __init__(self):
        super().__init__()
        self.mem = None

    def forward(self, x):
        self.mem = x if self.mem is None else 0.5 * self.mem.detach() + x
        return torch.tanh(self.mem)


class LeakyBug(Leaky):
    def forward(self, x):
        self.mem = x if self.mem is None else 0.5 * self.mem.detach() + x
        return torch.tanh(self.mem) * torch.cos(x.detach())  # the bug: a term detached


def grad_off(x):
    """Leaves grad mode off when it returns."""
    y = torch.sin(x)
    torch.set_grad_enabled(False)
    return y


def grad_off_bug(x):
    y = torch.sin(x.detach()) + x  # the bug: sin's gradient detached
    torch.set_grad_enabled(False)
    return y


def reentrant(x):
    return checkpoint(lambda t: torch.sin(t) * 2, x, use_reentrant=True)


def nonreentrant(x):
    return checkpoint(lambda t: torch.sin(t) * 2, x, use_reentrant=False)


class KeepsForBackward(nn.Module):
    """Keeps its input on itself in forward and reads it back in a hook during backward (as
    attribution and pruning code does): its state must still be there when backward runs."""

    def forward(self, x):
        self.kept = x.detach()
        y = x * 2
        if y.requires_grad:
            y.register_hook(lambda g: g * (self.kept.abs() >= 0).to(g.dtype))  # (ones)
        return y.sin()
