"""Custom ops for torch.library.opcheck's named checks (their own namespace: other tests
load tests/data/custom_ops.py, and an op registered again under one name replaces the last)."""

import torch


@torch.library.custom_op("gradscope_opcheck::cube", mutates_args=())
def cube(x: torch.Tensor) -> torch.Tensor:
    return x * x * x


@cube.register_fake
def _(x):
    return torch.empty_like(x)


def _keep(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _cube_backward(ctx, g):
    (x,) = ctx.saved_tensors
    return 3 * g * x * x


cube.register_autograd(_cube_backward, setup_context=_keep)


@torch.library.custom_op("gradscope_opcheck::no_fake", mutates_args=())
def no_fake(x: torch.Tensor) -> torch.Tensor:
    """Right gradient, but no fake implementation: opcheck's fake-tensor tests fail."""
    return x * x


def _no_fake_backward(ctx, g):
    (x,) = ctx.saved_tensors
    return 2 * g * x


no_fake.register_autograd(_no_fake_backward, setup_context=_keep)


@torch.library.custom_op("gradscope_opcheck::summed", mutates_args=())
def summed(x: torch.Tensor, dims: list[int], keep: bool = False) -> torch.Tensor:
    return x.sum(dims, keepdim=keep)


@summed.register_fake
def _(x, dims, keep=False):
    return x.sum(dims, keepdim=keep)


def _summed_context(ctx, inputs, output):
    ctx.shape, ctx.dims, ctx.keep = inputs[0].shape, inputs[1], inputs[2]


def _summed_backward(ctx, g):
    if not ctx.keep:
        for d in sorted(ctx.dims):
            g = g.unsqueeze(d)
    return g.expand(ctx.shape).clone(), None, None


summed.register_autograd(_summed_backward, setup_context=_summed_context)


def uses_cube(x):
    return cube(x).sum(-1)
