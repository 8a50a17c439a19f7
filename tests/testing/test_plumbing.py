"""The plumbing checks, natively: each must catch its own kind of broken backward (as torch's
gradcheck does) and pass correct ones — builtin ops, custom Functions, several outputs."""

from __future__ import annotations

import sys

import pytest
import torch

import gradscope
from gradscope.testing import plumbing
from gradscope.testing.call import GradcheckCall
from tests.testing import leaf

TORCH = sys.modules["torch.autograd.gradcheck"]


class Doubling(torch.autograd.Function):
    """y = 2·x: each broken backward below overrides its backward only."""

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


class NotTimesGrad(Doubling):
    """backward adds a constant: right where the upstream is one, wrong where it is zero."""

    @staticmethod
    def backward(ctx, g):
        return g * 2 + (g == 0).to(g.dtype)


class NoUndefined(torch.autograd.Function):
    """Two outputs, unmaterialised grads, and a backward that assumes both are defined."""

    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, g1, g2):
        return g1 * 2 + g2 * 3  # None * 2: TypeError when one is undefined


class HandlesUndefined(NoUndefined):
    """NoUndefined with a backward that skips an undefined gradient."""

    @staticmethod
    def backward(ctx, g1, g2):
        out = None
        for g, c in ((g1, 2), (g2, 3)):
            if g is not None:
                out = g * c if out is None else out + g * c
        return out


class Unbatchable(Doubling):
    """A backward that reads a value out of the upstream gradient: not vmap-compatible."""

    @staticmethod
    def backward(ctx, g):
        return g * 2 if float(g.sum()) == float(g.sum()) else g


class WrongDtype(Doubling):
    @staticmethod
    def backward(ctx, g):
        return (g * 2).float()


def _call(fn, *inputs):
    return GradcheckCall.of(fn, inputs)


def test_correct_ops_pass_every_plumbing_check():
    x, y = leaf(3, 4), leaf(3, 4, seed=1)
    for fn in (torch.sin, lambda a: (a.exp(), a.sum(0)), HandlesUndefined.apply):
        call = _call(fn, x)
        assert plumbing.multiplied_by_grad_output(call, dtypes=True) is None
        assert plumbing.undefined_grads(call) is None
        assert plumbing.batched_grads(call) is None
    assert plumbing.batched_grads(_call(torch.mul, x, y)) is None


def test_backward_not_multiplied_by_grad_output():
    problem = plumbing.multiplied_by_grad_output(_call(NotTimesGrad.apply, leaf(3)), False)
    assert problem and "not multiplied by grad_output" in problem
    assert not TORCH.gradcheck(NotTimesGrad.apply, (leaf(3),), raise_exception=False)


def test_undefined_output_gradients_must_be_handled():
    problem = plumbing.undefined_grads(_call(NoUndefined.apply, leaf(3)))
    assert problem and "undefined" in problem and "derivatives.yaml" in problem
    with pytest.raises(gradscope.GradcheckError, match="undefined"):
        gradscope.gradcheck(NoUndefined.apply, (leaf(3),))
    # torch's Jacobian takes each output alone whatever check_undefined_grad says: it raises
    # the TypeError; gradscope names it
    with pytest.raises(TypeError):
        TORCH.gradcheck(NoUndefined.apply, (leaf(3),), check_undefined_grad=False)
    with pytest.raises(gradscope.GradcheckError, match="taken alone"):
        gradscope.gradcheck(NoUndefined.apply, (leaf(3),), check_undefined_grad=False)


def test_batched_gradients_that_fail_or_differ():
    problem = plumbing.batched_grads(_call(Unbatchable.apply, leaf(3)))
    assert problem and "vmap" in problem
    assert not gradscope.gradcheck(Unbatchable.apply, (leaf(3),), check_batched_grad=True,
                                   raise_exception=False)
    assert gradscope.gradcheck(Unbatchable.apply, (leaf(3),))  # not asked: not checked
    assert not TORCH.gradcheck(Unbatchable.apply, (leaf(3),), check_batched_grad=True,
                               raise_exception=False)


def test_grad_dtypes_as_torch_sees_them():
    # autograd's engine casts a float32 gradient of a float64 input back: torch and gradscope
    # both see float64 and pass
    call = _call(WrongDtype.apply, leaf(3))
    assert plumbing.multiplied_by_grad_output(call, dtypes=True) is None
    assert TORCH.gradcheck(WrongDtype.apply, (leaf(3),), check_grad_dtypes=True)


class DropsAlone(NoUndefined):
    """NoUndefined's two outputs; the backward gives up (zeros) when the first output's
    gradient is undefined — right whenever both are used, wrong for the second output alone
    (what torch's native_group_norm does with its mean and rstd outputs)."""

    @staticmethod
    def backward(ctx, g1, g2):
        if g1 is None:
            return torch.zeros_like(g2)
        return g1 * 2 + (0 if g2 is None else g2 * 3)


def test_each_output_alone_against_the_same_with_zeros_for_the_others():
    call = _call(DropsAlone.apply, leaf(3))
    problem = plumbing.each_output_alone(call, call.wrapped_outputs())
    assert problem and "output 1" in problem and "taken alone" in problem
    assert not gradscope.gradcheck(DropsAlone.apply, (leaf(3),), raise_exception=False)
    assert not TORCH.gradcheck(DropsAlone.apply, (leaf(3),), raise_exception=False)
    fine = _call(HandlesUndefined.apply, leaf(3))
    assert plumbing.each_output_alone(fine, fine.wrapped_outputs()) is None
