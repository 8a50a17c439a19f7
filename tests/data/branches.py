"""Custom Functions whose backward is wrong on one branch only — the bugs default inputs used to
hide — with their correct twins, and surrogate gradients right and wrong."""

import math

import torch

# ------------------------------------------------------------ a bug on one side of a branch


class LeakySwish(torch.autograd.Function):
    """x·sigmoid(x) for x ≥ 0, 0.1·x·sigmoid(x) below: a correct backward on both sides."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        s = torch.sigmoid(x)
        return torch.where(x < 0, 0.1 * x * s, x * s)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        d = s + x * s * (1 - s)
        return g * torch.where(x < 0, 0.1 * d, d)


class LeakySwishBug(LeakySwish):
    """The same forward; the backward forgets the 0.1 of the x < 0 branch (10× there)."""

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        d = s + x * s * (1 - s)
        return g * torch.where(x < 0, d, d)


class SoftClip(torch.autograd.Function):
    """clamp(x, -1, 1) with a backward that passes the gradient where the clamp saturates."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(-1, 1) + 0.01 * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * ((x.abs() <= 1).to(g.dtype) + 0.01 + 0.05 * (x.abs() > 1))


class WideCube(torch.autograd.Function):
    """x³ with a backward that is right for |x| ≤ 1 and halves beyond."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x ** 2 * torch.where(x.abs() > 1, 0.5, 1.0)


class Sinc(torch.autograd.Function):
    """sin(x)/x, 1 at 0, with a backward that is right everywhere — even at exactly 0."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        safe = torch.where(x == 0, torch.ones_like(x), x)
        return torch.where(x == 0, torch.ones_like(x), torch.sin(safe) / safe)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        safe = torch.where(x == 0, torch.ones_like(x), x)
        d = (safe * torch.cos(safe) - torch.sin(safe)) / safe ** 2
        return g * torch.where(x == 0, torch.zeros_like(x), d)


class SincBug(Sinc):
    """The same forward; the backward's 0/0 at exactly 0 (a bug only at exact zeros)."""

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x * torch.cos(x) - torch.sin(x)) / x ** 2


# ------------------------------------------------------------ surrogate gradients


class RoundSTE(torch.autograd.Function):
    """round with the identity straight-through estimator."""

    @staticmethod
    def forward(ctx, x):
        return torch.round(x)

    @staticmethod
    def backward(ctx, g):
        return g


class RoundSTETwice(RoundSTE):
    """round whose straight-through gradient is 2·g: twice what the staircase rises."""

    @staticmethod
    def backward(ctx, g):
        return 2 * g


class SignSTE(torch.autograd.Function):
    """BinaryNet's sign with the hardtanh-gated straight-through estimator."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sign(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x.abs() <= 1).to(g.dtype)


class SignSTEWideWindow(SignSTE):
    """sign whose straight-through window is |x| ≤ 3: it claims a rise of 6 for a jump of 2."""

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x.abs() <= 3).to(g.dtype)


class Spike(torch.autograd.Function):
    """A Heaviside spike with the fast-sigmoid (SuperSpike) surrogate, as snnTorch writes it."""

    @staticmethod
    def forward(ctx, mem):
        ctx.save_for_backward(mem)
        return (mem > 0).to(mem.dtype)

    @staticmethod
    def backward(ctx, g):
        (mem,) = ctx.saved_tensors
        return g / (25.0 * mem.abs() + 1.0) ** 2


class SpikeFlipped(Spike):
    """The same spike; the surrogate's sign flipped for mem < 0."""

    @staticmethod
    def backward(ctx, g):
        (mem,) = ctx.saved_tensors
        return g * torch.sign(mem) / (25.0 * mem.abs() + 1.0) ** 2


class SpikeAtan(Spike):
    """The same spike with spikingjelly's arctan surrogate (normalised: it integrates to 1)."""

    @staticmethod
    def backward(ctx, g):
        (mem,) = ctx.saved_tensors
        alpha = 2.0
        return g * alpha / 2 / (1 + (math.pi / 2 * alpha * mem) ** 2)


def detach_round(x):
    """The detach trick: round forward, identity backward."""
    return x + (x.round() - x).detach()


# ------------------------------------------------------------ a factor that is the user's own


def scaled_matmul(x, w, scale: float = 2.0):
    """x @ w · scale through a Function whose backward forgets `* scale`."""
    return _ScaledMatmul.apply(x, w, scale)


class _ScaledMatmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, scale):
        ctx.save_for_backward(x, w)
        return x @ w * scale

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g @ w.t(), x.t() @ g, None


# ------------------------------------------------------------ surrogates inside larger code


def spikes_counted(mem):
    """How many neurons fire, through the fast-sigmoid spike (one output: not elementwise)."""
    return Spike.apply(mem).sum()


def spikes_counted_flipped(mem):
    return SpikeFlipped.apply(mem).sum()


def rounded_running_total(x):
    """A running total of rounded values (each output reads every earlier element)."""
    return RoundSTE.apply(x).cumsum(0)


def rounded_running_total_twice(x):
    return RoundSTETwice.apply(x).cumsum(0)


# ------------------------------------------------------------ declared with their intended form


@__import__("gradscope").surrogate("gated straight-through", reference=torch.nn.functional.hardtanh)
class SignSTEDeclared(SignSTE):
    """The hardtanh-gated sign, declared with its intended form."""


@__import__("gradscope").surrogate("gated straight-through", reference=torch.nn.functional.hardtanh)
class SignSTEWideDeclared(SignSTEWideWindow):
    """The |x| ≤ 3 window, declared as hardtanh's: the declaration does not match."""


class LIF(torch.nn.Module):
    """A leaky integrate-and-fire layer over 5 time steps, spikes counted, through the
    fast-sigmoid spike: every input and weight is a surrogate's (and the probes of one weight
    happen to trade spikes between its two rows at every value they try)."""

    spike = Spike

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = torch.nn.Linear(6, 4)

    def forward(self, x):
        mem = torch.zeros(x.shape[0], 4, dtype=x.dtype)
        out = 0
        for _ in range(5):
            mem = 0.9 * mem + self.fc(x)
            spk = self.spike.apply(mem - 1.0)
            mem = mem - spk
            out = out + spk
        return out.sum()


class LIFFlipped(LIF):
    spike = SpikeFlipped
