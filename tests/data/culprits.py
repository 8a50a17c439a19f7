"""Models with custom Functions inside, one of them wrong — and their negatives: a correct
model, a straight-through quantizer on the way (a surrogate, not a culprit), and a bug that
lies in no Function (a gradient hook) so that no Function may be named."""

import torch
from torch import nn


class Swish(torch.autograd.Function):
    """x·sigmoid(x), correct."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        return g * (s + x * s * (1 - s))


class LeakyReLU(torch.autograd.Function):
    """max(x, 0.1·x), correct."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.where(x > 0, x, 0.1 * x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * torch.where(x > 0, 1.0, 0.1)


class BuggyLeakyReLU(LeakyReLU):
    """The same forward; the negative side's slope halved in backward."""

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * torch.where(x > 0, 1.0, 0.05)


class RoundSTE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return torch.round(x * 4) / 4

    @staticmethod
    def backward(ctx, g):
        return g


class Net(nn.Module):
    """Linear → Swish → Linear → activation → Linear, to a scalar loss."""

    activation = LeakyReLU

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc1 = nn.Linear(6, 8)
        self.fc2 = nn.Linear(8, 8)
        self.fc3 = nn.Linear(8, 1)

    def forward(self, x):
        h = Swish.apply(self.fc1(x))
        h = self.activation.apply(self.fc2(h))
        return self.fc3(h).pow(2).mean()


class BuggyNet(Net):
    activation = BuggyLeakyReLU


class QuantizedNet(Net):
    """A correct net whose hidden layer is quantized with a straight-through round."""

    def forward(self, x):
        h = Swish.apply(self.fc1(x))
        h = LeakyReLU.apply(self.fc2(RoundSTE.apply(h)))
        return self.fc3(h).pow(2).mean()


class HookedNet(Net):
    """Correct Functions; a gradient hook doubles the hidden layer's gradient."""

    def forward(self, x):
        h = Swish.apply(self.fc1(x))
        if h.requires_grad:
            h.register_hook(lambda g: 2 * g)
        h = LeakyReLU.apply(self.fc2(h))
        return self.fc3(h).pow(2).mean()


class TwoOutputs(torch.autograd.Function):
    """(2x, x²): right; used below through its second output only."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return 2 * x, x * x

    @staticmethod
    def backward(ctx, g_double, g_square):
        (x,) = ctx.saved_tensors
        g = torch.zeros_like(x)
        if g_double is not None:
            g = g + 2 * g_double
        if g_square is not None:
            g = g + 2 * x * g_square
        return g


class TwoOutputsBug(TwoOutputs):
    @staticmethod
    def backward(ctx, g_double, g_square):
        (x,) = ctx.saved_tensors
        return 2 * g_double + 3 * x * g_square  # the bug: 3x where the derivative is 2x


def second_output(x):
    return torch.tanh(TwoOutputs.apply(x)[1])


def second_output_bug(x):
    return torch.tanh(TwoOutputsBug.apply(x)[1])


class RowNorm(torch.autograd.Function):
    """x / |x| per row, old style (ctx in forward, no setup_context: torch.func refuses it),
    counting the calls of its forward."""

    forwards = 0

    @staticmethod
    def forward(ctx, x):
        RowNorm.forwards += 1
        norm = x.norm(dim=-1, keepdim=True)
        ctx.save_for_backward(x, norm)
        return x / norm

    @staticmethod
    def backward(ctx, grad):
        x, norm = ctx.saved_tensors
        y = x / norm
        return (grad - y * (grad * y).sum(-1, keepdim=True)) / norm


class RowNormBug(RowNorm):
    """The projection term halved."""

    @staticmethod
    def backward(ctx, grad):
        x, norm = ctx.saved_tensors
        y = x / norm
        return (grad - 0.5 * y * (grad * y).sum(-1, keepdim=True)) / norm


class FirstRowBug(RowNorm):
    """Right, except that its first row's gradient is doubled: a located bug that every
    upstream shows in that row alone."""

    @staticmethod
    def backward(ctx, grad):
        out = RowNorm.backward(ctx, grad)
        return torch.cat([2 * out[:1], out[1:]])


class ItemScaledBug(torch.autograd.Function):
    """Old style, with a forward that reads a number out of its input (`.item()`: vmap refuses
    it, stand-in ctx or not) and a backward that forgets that scale."""

    @staticmethod
    def forward(ctx, x):
        scale = 1.0 + float(x.abs().max().item() > 100.0)
        ctx.save_for_backward(x)
        ctx.scale = scale
        return torch.sin(x) * scale * x.sum()

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * torch.cos(x) * x.sum()  # (the sum's own term missing)


def _row_weights(x):
    """A weight per row, the first row's 0: that row's gradient never reaches the output."""
    return torch.arange(x.shape[0], dtype=x.dtype).unsqueeze(-1)


def rows_weighted_bug(x):
    """RowNormBug, its first row unused: the gradient it gets leaves that row right, and only
    a fresh draw shows that its backward is wrong in every row."""
    return (RowNormBug.apply(x) * _row_weights(x)).sum()


def rows_weighted_first_bug(x):
    """FirstRowBug, every row used (the weights shifted by one): wrong in its first row on
    every draw."""
    return (FirstRowBug.apply(x) * (_row_weights(x) + 1)).sum()


class FirstHalfDouble(torch.autograd.Function):
    """sin, whose backward doubles the first half of its elements by position: on sorted
    inputs the wrong half is also the negative half, a value partition a fresh draw refutes."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sin(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        scale = torch.ones_like(x)
        scale[: x.numel() // 2] = 2.0
        return g * torch.cos(x) * scale


def first_half_bug(x):
    return FirstHalfDouble.apply(x)


class HardSwishMiddleBug(torch.autograd.Function):
    """hard-swish whose backward's middle case is 2× the derivative: wrong exactly where
    |x| < 3, by value, at any values."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.clamp(x + 3, 0, 6) / 6

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        middle = (2 * x + 3) / 3  # should be / 6
        slope = torch.where(x <= -3, torch.zeros_like(x),
                            torch.where(x >= 3, torch.ones_like(x), middle))
        return g * slope


def hard_swish_bug(x):
    return HardSwishMiddleBug.apply(x)
