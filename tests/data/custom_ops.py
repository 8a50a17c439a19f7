"""torch.library custom ops with a registered autograd, used inside functions: a right one, and
one whose registered backward is 1.5 times too large — the culprit is that backward, named
with its op and its line, not the Function torch generates for it."""

import torch


@torch.library.custom_op("gradscope_culprits::sine", mutates_args=())
def sine(x: torch.Tensor) -> torch.Tensor:
    return torch.sin(x)


@sine.register_fake
def _(x):
    return torch.empty_like(x)


def _keep(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _sine_backward(ctx, g):
    (x,) = ctx.saved_tensors
    return g * torch.cos(x)


sine.register_autograd(_sine_backward, setup_context=_keep)


@torch.library.custom_op("gradscope_culprits::sine_bug", mutates_args=())
def sine_bug(x: torch.Tensor) -> torch.Tensor:
    return torch.sin(x)


@sine_bug.register_fake
def _(x):
    return torch.empty_like(x)


def _sine_bug_backward(ctx, g):
    (x,) = ctx.saved_tensors
    return g * torch.cos(x) * 1.5


sine_bug.register_autograd(_sine_bug_backward, setup_context=_keep)


def uses_sine(x):
    return sine(x * 2).sum(-1)


def uses_sine_bug(x):
    return sine_bug(x * 2).sum(-1)


@torch.library.custom_op("gradscope_culprits::scaled", mutates_args=())
def scaled(x: torch.Tensor, alpha: float, bias: torch.Tensor | None = None,
           twice: bool = False) -> torch.Tensor:
    y = x * alpha if bias is None else x * alpha + bias
    return y * 2 if twice else y


def _scaled_context(ctx, inputs, output):
    ctx.alpha, ctx.bias, ctx.twice = inputs[1], inputs[2] is not None, inputs[3]


def _scaled_backward(ctx, g):
    k = 2 if ctx.twice else 1
    return g * ctx.alpha * k, None, (g * k if ctx.bias else None), None


scaled.register_autograd(_scaled_backward, setup_context=_scaled_context)


@torch.library.custom_op("gradscope_culprits::stack_sum", mutates_args=())
def stack_sum(xs: list[torch.Tensor]) -> torch.Tensor:
    return torch.stack(xs).sum(0)


@torch.library.custom_op("gradscope_culprits::summed", mutates_args=())
def summed(x: torch.Tensor, dims: list[int], keep: bool = False) -> torch.Tensor:
    return x.sum(dims, keepdim=keep)


def _summed_context(ctx, inputs, output):
    ctx.shape, ctx.dims, ctx.keep = inputs[0].shape, inputs[1], inputs[2]


def _summed_backward(ctx, g):
    if not ctx.keep:
        for d in sorted(ctx.dims):
            g = g.unsqueeze(d)
    return g.expand(ctx.shape).clone(), None, None


summed.register_autograd(_summed_backward, setup_context=_summed_context)


# fake implementations (torch.compile and opcheck's fake-tensor tests need them)
@scaled.register_fake
def _(x, alpha, bias=None, twice=False):
    return torch.empty_like(x)


@summed.register_fake
def _(x, dims, keep=False):
    return x.sum(dims, keepdim=keep)


@torch.library.custom_op("gradscope_culprits::cube_unregistered", mutates_args=())
def cube_unregistered(x: torch.Tensor) -> torch.Tensor:
    """A custom op with a fake implementation but no autograd formula."""
    return x**3


@cube_unregistered.register_fake
def _(x):
    return torch.empty_like(x)


def uses_unregistered(x):
    return (cube_unregistered(x) * 2).sum() + x.sum()


def _keep_output(ctx, inputs, output):
    ctx.save_for_backward(output)


def _exp_backward(ctx, g):
    (y,) = ctx.saved_tensors
    return g * y


@torch.library.custom_op("gradscope_culprits::exp_scratch", mutates_args=())
def exp_scratch(x: torch.Tensor) -> torch.Tensor:
    """exp, using its input as scratch space while declaring no mutation: its gradient is
    right (backward reads the output), its schema is not (opcheck's test_schema)."""
    y = torch.exp(x)
    x.copy_(y)
    return y.clone()


@torch.library.custom_op("gradscope_culprits::exp_copy", mutates_args=())
def exp_copy(x: torch.Tensor) -> torch.Tensor:
    """The right twin: its scratch space is its own copy."""
    scratch = x.clone()
    scratch.exp_()
    return scratch


for _op in (exp_scratch, exp_copy):
    _op.register_fake(lambda x: torch.empty_like(x))
    _op.register_autograd(_exp_backward, setup_context=_keep_output)


def uses_exp_scratch(x):
    return exp_scratch(x * 2).sum()


def uses_exp_copy(x):
    return exp_copy(x * 2).sum()
