"""Targets for --autocast: a model whose linear layers run in bfloat16 under autocast, and
custom Functions written for mixed precision with torch.amp.custom_fwd/custom_bwd — a fused
scaled-tanh whose backward is right, and one whose backward forgets the scale."""

import torch


class ScaledTanh(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cpu", cast_inputs=torch.float32)
    def forward(ctx, x, scale):
        y = torch.tanh(x * scale)
        ctx.save_for_backward(x, y, scale)
        return y

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(ctx, g):
        x, y, scale = ctx.saved_tensors
        dy = g * (1 - y * y)
        return dy * scale, (dy * x).sum()


class ScaledTanhBug(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cpu", cast_inputs=torch.float32)
    def forward(ctx, x, scale):
        y = torch.tanh(x * scale)
        ctx.save_for_backward(x, y, scale)
        return y

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(ctx, g):
        x, y, _scale = ctx.saved_tensors
        dy = g * (1 - y * y)
        return dy, (dy * x).sum()  # the scale forgotten in x's gradient


class Head(torch.nn.Module):
    """A linear layer (bfloat16 under autocast) into the fused activation."""

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


def mlp(x, w1, w2):
    """Plain torch: matmuls in bfloat16 under autocast, the rest in float32."""
    return torch.tanh(x @ w1) @ w2


class SquareHalfBug(torch.autograd.Function):
    """x², whose backward is right in float32 and `factor` times too large in half precision:
    a bug that only autocast shows."""

    factor = 1.5

    @staticmethod
    @torch.amp.custom_fwd(device_type="cpu")
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        scale = SquareHalfBug.factor if x.dtype in (torch.float16, torch.bfloat16) else 1.0
        return g * 2 * x * scale


class SquareHalfBugSlight(SquareHalfBug):
    """The same, 5 % too large in half precision."""

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        scale = 1.05 if x.dtype in (torch.float16, torch.bfloat16) else 1.0
        return g * 2 * x * scale


class HalfOnlyHead(torch.nn.Module):
    """A linear layer (half precision under autocast) into SquareHalfBug."""

    def __init__(self, act: type = SquareHalfBug):
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(8, 4)
        self.act = act

    def forward(self, x):
        return self.act.apply(self.lin(x))


class HalfOnlyHeadSlight(HalfOnlyHead):
    def __init__(self):
        super().__init__(SquareHalfBugSlight)


class ScaledTanhEight(ScaledTanh):
    """The right forward in float32 (custom_fwd casts to it); the backward 8 % too large for
    x, computed in float32 too — behind a bfloat16 linear, which alone must not widen the
    check to bfloat16's 10 %."""

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(ctx, g):
        x, y, scale = ctx.saved_tensors
        dy = g * (1 - y * y)
        return dy * scale * 1.08, (dy * x).sum()


class HeadEight(Head):
    def __init__(self):
        super().__init__()
        self.act = ScaledTanhEight


class SquareHalf(torch.autograd.Function):
    """x² · s computed in the dtype it is given (bfloat16 under autocast), its backward
    right: its rounding, and the scale's, are no bug."""

    @staticmethod
    @torch.amp.custom_fwd(device_type="cpu")
    def forward(ctx, x, s):
        ctx.save_for_backward(x, s)
        return x * x * s

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(ctx, g):
        x, s = ctx.saved_tensors
        return g * 2 * x * s, (g * x * x).sum()


class HalfRightHead(torch.nn.Module):
    """A linear layer (half precision under autocast) into the right SquareHalf."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(8, 4)
        self.s = torch.nn.Parameter(torch.tensor(0.3))

    def forward(self, x):
        return SquareHalf.apply(self.lin(x), self.s)
