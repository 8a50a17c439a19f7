"""Targets for benchmarks/cuda.py: tests/data/mixed.py's fused scaled-tanh written for the
device it runs on (custom_fwd/custom_bwd name a device type; tests/data/mixed.py's name the
CPU), right and with the scale forgotten in x's gradient."""

import torch

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


class ScaledTanh(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type=DEVICE, cast_inputs=torch.float32)
    def forward(ctx, x, scale):
        y = torch.tanh(x * scale)
        ctx.save_for_backward(x, y, scale)
        return y

    @staticmethod
    @torch.amp.custom_bwd(device_type=DEVICE)
    def backward(ctx, g):
        x, y, scale = ctx.saved_tensors
        dy = g * (1 - y * y)
        return dy * scale, (dy * x).sum()


class ScaledTanhBug(ScaledTanh):
    @staticmethod
    @torch.amp.custom_bwd(device_type=DEVICE)
    def backward(ctx, g):
        x, y, _scale = ctx.saved_tensors
        dy = g * (1 - y * y)
        return dy, (dy * x).sum()  # the scale forgotten in x's gradient


class Head(torch.nn.Module):
    """A linear layer (low precision under autocast) into the fused activation."""

    def __init__(self, bug: bool = False):
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(8, 4)
        self.scale = torch.nn.Parameter(torch.tensor(0.5))
        self.act = ScaledTanhBug if bug else ScaledTanh

    def forward(self, x):
        return self.act.apply(self.lin(x), self.scale)


class HeadBug(Head):
    def __init__(self):
        super().__init__(bug=True)


class ScaledTanhEight(ScaledTanh):
    """x's gradient 8 % too large, in float32, behind the low-precision linear."""

    @staticmethod
    @torch.amp.custom_bwd(device_type=DEVICE)
    def backward(ctx, g):
        x, y, scale = ctx.saved_tensors
        dy = g * (1 - y * y)
        return dy * scale * 1.08, (dy * x).sum()


class HeadEight(Head):
    def __init__(self):
        super().__init__()
        self.act = ScaledTanhEight
