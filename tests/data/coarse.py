"""Targets that round more coarsely than the finite-difference step suits: a Function computing
in float32 with a backward 1.5x too large on its first row (at --eps 1e-6 its central
differences are swamped by round-off: they must be retried at larger steps and still fail it,
never taken for kinks), its correct twin, and a float16 offset whose round-off no step below
0.1 of the element beats (its elements are `unchecked`, never `ok` and never a kink)."""

import torch


class CubeRowBug(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x32 = x.float()
        ctx.save_for_backward(x32)
        return x32 ** 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        gx = 3 * x * x * g
        gx[0] = gx[0] * 1.5
        return gx


class Cube32(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x32 = x.float()
        ctx.save_for_backward(x32)
        return x32 ** 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x * x * g


def half_offset(x):
    return x.half() + 1000


class Sin32Bug(torch.autograd.Function):
    """sin on float32 tensors, its backward 1.5x too large."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 1.5 * g * x.cos()


def inner_float(x):
    """float64 in and out, one step in float32 between: its round-off is float32's."""
    return (torch.sin(x.float()) * 3).double()


def inner_float_bug(x):
    return (Sin32Bug.apply(x.float()) * 3).double()
