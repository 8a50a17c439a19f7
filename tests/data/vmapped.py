"""Functions called inside vmap (generate_vmap_rule): torch runs each call as a class it
generates for that call; the user's backward is what a culprit must name. A wrong one (a norm
whose backward drops the ½ of d√s), its right twin, nested vmaps, an argument vmap leaves
unbatched, and a Function with a wrong backward beside a right one in the same vmap."""

import torch
from torch.func import vmap


class RootBug(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(s):
        return s.sqrt()

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g / y  # should be g / (2 y)


class Root(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(s):
        return s.sqrt()

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g / (2 * y)


def row_norms_bug(x):
    return vmap(lambda r: RootBug.apply((r * r).sum() + 1))(x)


def row_norms(x):
    return vmap(lambda r: Root.apply((r * r).sum() + 1))(x)


def nested_bug(x):
    return vmap(vmap(lambda s: RootBug.apply(s * s + 1)))(x)


def nested(x):
    return vmap(vmap(lambda s: Root.apply(s * s + 1)))(x)


def shared_weight_bug(x, w):
    # w is the same for every row (in_dims None): torch sums its per-row gradients
    return vmap(lambda r, c: RootBug.apply(((r * c).sum()) ** 2 + 1), in_dims=(0, None))(x, w)


def both(x):
    return vmap(lambda r: Root.apply((r * r).sum() + 1) + RootBug.apply((r * r).sum() + 2))(x)
