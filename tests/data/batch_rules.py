"""Custom Functions with a `vmap` rule of their own: what finite differences' batched
evaluations call instead of forward. A rule that agrees with forward, one that computes twice
forward (which a backward twice too large would agree with, batch by batch), and their
backwards right and wrong."""

import torch


class _Square(torch.autograd.Function):
    """x²; `rule` scales the batched forward, `slope` the backward."""

    rule = 1.0
    slope = 1.0

    @staticmethod
    def forward(x):
        return x * x

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 2 * x * ctx._forward_cls.slope

    @classmethod
    def vmap(cls, info, in_dims, x):
        # (a rule of its own: the batch computed at once, scaled by `rule`)
        return cls.rule * x * x, in_dims[0]


class Square(_Square):
    pass


class SquareWrongRule(_Square):
    """Right backward, batched rule twice forward: the rule is wrong, not the backward."""

    rule = 2.0


class SquareWrongBoth(_Square):
    """Backward twice the derivative, batched rule twice forward: batched differences agree
    with the wrong backward; plain calls do not."""

    rule = 2.0
    slope = 2.0


class SquareWrongBackward(_Square):
    slope = 2.0


def summed(cls_name: str):
    cls = globals()[cls_name]

    def f(x):
        return cls.apply(x).sum(-1)

    f.__name__ = f"summed_{cls_name}"
    return f


# row sums (not elementwise: finite differences evaluate columns, in vmap batches)
square_rows = summed("Square")
wrong_rule_rows = summed("SquareWrongRule")
wrong_both_rows = summed("SquareWrongBoth")
wrong_backward_rows = summed("SquareWrongBackward")
