"""Targets for --compile: correct code, and the silent-correctness reports of torch.compile
that reproduce on torch 2.13 CPU (each named after its pytorch issue), beside ones fixed there."""

import math

import torch
import torch.nn.functional as F


def smooth(x):
    return torch.tanh(x) * x.sin()


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(3, 2)

    def forward(self, x):
        return torch.tanh(self.lin(x)).square()


def chatty(x):
    y = x.sin()
    print("a graph break")  # dynamo breaks the graph at print
    return y * x


# pytorch #185464: the decomposition of multilabel_margin_loss ignores the -1 stop marker
# (aot_eager and inductor: forward and gradient)
MARGIN_TARGET = torch.tensor([[0, 1, -1, -1, -1]])


def multilabel_margin(x):
    return F.multilabel_margin_loss(x, MARGIN_TARGET)


# pytorch #198119: inductor's avg_pool backward divides an overhanging ceil_mode window by the
# full kernel size
def avg_pool_ceil(x):
    return F.avg_pool1d(x, 3, 2, ceil_mode=True)


# pytorch #197888: inductor lays the saved indices of adaptive_max_pool3d out channels-last
# and the CPU backward reads them as contiguous
def adaptive_max_pool3d(t):
    return F.adaptive_max_pool3d(t, (2, 3, 5))


# pytorch #193279: under torch.func.grad inside torch.compile, dynamo inlines a Function's
# forward and drops its backward
class DetachedSin(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return torch.sin(x.detach())

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * torch.cos(x)


def _sin_loss(x):
    return DetachedSin.apply(x).sum()


grad_of_sin_loss = torch.func.grad(_sin_loss)


# pytorch #183604 (fixed in 2.13): a Function given the same tensor twice
class AddMul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b + a + b

    @staticmethod
    def backward(ctx, go):
        a, b = ctx.saved_tensors
        return go * (b + 1), go * (a + 1)


def same_tensor_twice(x):
    return AddMul.apply(x, x)


# pytorch #180642 (fixed in 2.13): an in-place op inside a Function's forward
class InPlaceForward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x * 2
        y += 1
        return y

    @staticmethod
    def backward(ctx, g):
        return g * 2


def inplace_in_forward(x):
    return InPlaceForward.apply(x).sin()


# pytorch #136662 (fixed in 2.13): torch.func.grad of in-place accumulation, compiled
def _accumulated(x):
    y = torch.zeros_like(x)
    y[:, 0] += x[:, 2] ** 2
    y[:, 0] += x[:, 2] ** 2
    return y.sum()


grad_of_accumulated = torch.func.grad(_accumulated)


def refuses_compile(x):
    if torch.compiler.is_compiling():
        raise RuntimeError("this code refuses torch.compile")
    return x * 2


def failing_backend(gm, example_inputs):
    """A backend that cannot compile anything (a compile error is the target's: exit 3)."""
    raise RuntimeError("failing_backend compiles nothing")


if "failing_backend" not in torch.compiler.list_backends(exclude_tags=()):
    torch._dynamo.register_backend(failing_backend)


# already compiled in the user's file (checked without --compile: called only the plain way)
precompiled = torch.compile(smooth, backend="aot_eager")
precompiled_block = torch.compile(Block(), backend="aot_eager")


def _tanh_block(x, w1, w2):
    return torch.tanh(x @ w1) @ w2


# under inductor, two backward calls may differ by round-off (not nondeterminism)
precompiled_inductor = torch.compile(_tanh_block, backend="inductor")


def calls_compiled(x, w1, w2):
    """User code around a compiled function: its graph shows the compiled backward."""
    return precompiled_inductor(x, w1, w2).square().sum(0)


BLOCK = Block()


def block_loss(x):
    """A training-style function over a global module (its parameters are checked too)."""
    return BLOCK(x).square().mean()


class ListSin(torch.autograd.Function):
    """A forward dynamo cannot trace (values read as a list): the compiled function's output
    graph shows no compiled backward, only the function itself is compiled."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.new_tensor([math.sin(v) for v in x.detach().tolist()])

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.cos()


def _list_sin(x):
    return ListSin.apply(x)


list_sin_compiled = torch.compile(_list_sin, backend="aot_eager")
