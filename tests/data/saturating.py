"""Functions that saturate at the default inputs (a spread over ±6.37 makes sparsemax nearly
one-hot), each with a twin whose backward is wrong there: a flat forward excuses a gradient
only as the surrogate of a step, with its proof — never a sum over the wrong axis."""

import torch
from torch.autograd import Function


class Sparsemax(Function):
    @staticmethod
    def forward(ctx, z):
        zs, _ = torch.sort(z, dim=-1, descending=True)
        k = torch.arange(1, z.shape[-1] + 1, dtype=z.dtype)
        cs = zs.cumsum(-1)
        support = (1 + k * zs) > cs
        kz = support.sum(-1, keepdim=True)
        tau = (cs.gather(-1, kz - 1) - 1) / kz
        out = torch.clamp(z - tau, min=0)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        nz = (out > 0).to(g.dtype)
        s = (g * nz).sum(-1, keepdim=True) / nz.sum(-1, keepdim=True)
        return nz * (g - s)


class SparsemaxWrongAxis(Sparsemax):
    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        nz = (out > 0).to(g.dtype)
        s = (g * nz).sum(0, keepdim=True) / nz.sum(0, keepdim=True).clamp(min=1)  # the bug
        return nz * (g - s)


def sparsemax(z):
    return Sparsemax.apply(z)


def sparsemax_wrong_axis(z):
    return SparsemaxWrongAxis.apply(z)


class Relu6Leak(Function):
    """clamp(x, 0, 6) whose backward leaks 0.3 past the top: clamp is no step, so no surrogate."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(0, 6)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * ((x > 0) & (x < 6)).to(g.dtype) + 0.3 * g * (x >= 6).to(g.dtype)


class RoundSTE(Function):
    """A step with the textbook straight-through surrogate: excused, with its proof."""

    @staticmethod
    def forward(ctx, x):
        return torch.round(x)

    @staticmethod
    def backward(ctx, g):
        return g


def relu6_leak(x):
    return Relu6Leak.apply(x)


def round_ste(x):
    return RoundSTE.apply(x)


class SigmoidRound(Function):
    """round with a sigmoid'-shaped surrogate, 25 times the one it is declared to be."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.round(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(4 * (x - torch.round(x)))
        return g * 4 * s * (1 - s) * 25


def sigmoid_round(x):
    return SigmoidRound.apply(x)


class SparsemaxDoubled(Sparsemax):
    """A backward twice too large: 0 = 2 × 0 at a one-hot row, so only points where
    sparsemax moves show it (gradscope narrows its drawn inputs there)."""

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        nz = (out > 0).to(g.dtype)
        s = (g * nz).sum(-1, keepdim=True) / nz.sum(-1, keepdim=True)
        return 2 * nz * (g - s)


def sparsemax_doubled(z):
    return SparsemaxDoubled.apply(z)


def hard_threshold(x):
    """Flat almost everywhere at any spread (a step): never narrowed, as nothing moves more."""
    return (x > 0.5).to(x.dtype) * x.detach() + 0 * x


class ClippedOuter(Function):
    """Identity near 0, flat for 0.5 < |x| < 6, x ∓ 6 past ±6 (most of the default spread is
    flat, so the drawn inputs are narrowed); its backward is 3× too large on the outer path,
    which only the default spread reaches."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        inner, outer = x.abs() < 0.5, x.abs() > 6
        return torch.where(inner, x, torch.where(outer, x - 6 * x.sign(), torch.zeros_like(x)))

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        inner, outer = x.abs() < 0.5, x.abs() > 6
        return g * torch.where(inner, 1.0, torch.where(outer, 3.0, 0.0)).to(g)


class ClippedOuterRight(ClippedOuter):
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * ((x.abs() < 0.5) | (x.abs() > 6)).to(g)


class SteepRank(Function):
    """A soft rank: each element's count of the others below it through a steep sigmoid
    (temperature 0.01): at the default spread every comparison saturates, and the backward
    multiplies zeros everywhere."""

    @staticmethod
    def forward(ctx, x):
        s = torch.sigmoid((x.unsqueeze(-1) - x.unsqueeze(-2)) / 0.01)
        ctx.save_for_backward(s)
        return s.sum(-1)

    @staticmethod
    def backward(ctx, g):
        (s,) = ctx.saved_tensors
        d = s * (1 - s) / 0.01
        return g * d.sum(-1) - (g.unsqueeze(-1) * d).sum(-2)


class SteepRankOff(SteepRank):
    """The same with a factor 0.2 in its backward, unseen where every comparison saturates."""

    @staticmethod
    def backward(ctx, g):
        (s,) = ctx.saved_tensors
        d = s * (1 - s) / 0.01
        return 0.2 * (g * d.sum(-1) - (g.unsqueeze(-1) * d).sum(-2))


def steep_rank_loss(x):
    return (SteepRank.apply(x) * torch.arange(x.shape[-1], dtype=x.dtype)).sum()


def steep_rank_off_loss(x):
    return (SteepRankOff.apply(x) * torch.arange(x.shape[-1], dtype=x.dtype)).sum()
