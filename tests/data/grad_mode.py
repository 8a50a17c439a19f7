"""Targets that switch grad mode off and leave it so, or register a hook on an intermediate
in their forward (which needs grad mode and inputs that require grad)."""

import torch


def leaves_off(x):
    torch.set_grad_enabled(False)
    return x * 2
def hooked(x):
    y = x * 3
    if y.requires_grad:
        y.register_hook(lambda g: g)
    return y.sin()
def hooked_always(x):
    y = x * 3
    y.register_hook(lambda g: g)
    return y.sin()
