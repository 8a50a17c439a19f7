"""A Function the inputs saturate is exercised where it is active: its arguments scaled down
until its backward and derivative are no longer ~0 almost everywhere, checked there."""

from __future__ import annotations

import pytest
import torch

from gradscope.compare.tolerance import Tolerance
from gradscope.explain.relations import Arrays
from gradscope.features.inplace import saturated
from gradscope.features.inplace.calls import FunctionCall

TOL = Tolerance(1e-6, 1e-9)


def _arrays(autograd, reference):
    return Arrays(autograd, reference, None, torch.zeros_like(autograd, dtype=torch.int8))


def test_quiet_means_both_sides_near_zero_almost_everywhere():
    zeros, ones = torch.zeros(100, dtype=torch.float64), torch.ones(100, dtype=torch.float64)
    assert saturated.quiet({"x": (_arrays(zeros, zeros), 0)}, TOL)
    # a backward that is ~0 against a derivative that is not: not saturated, a bug to see
    assert not saturated.quiet({"x": (_arrays(zeros, ones), 0)}, TOL)
    few = zeros.clone()
    few[:10] = 1.0  # 90 % quiet: below the share
    assert not saturated.quiet({"x": (_arrays(few, few), 0)}, TOL)


class Steep(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sigmoid(x / 0.01)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x / 0.01)
        return g * s * (1 - s) / 0.01


def test_the_first_scale_that_wakes_the_call_is_where_it_is_checked():
    call = FunctionCall(Steep, (torch.linspace(-6, 6, 25, dtype=torch.float64),), {}, None)
    asked = []

    def check(moved):
        asked.append(float(moved.args[0].abs().max()))
        assert moved.returned and moved.received  # (a backward's answer recorded)
        return None, 25, asked[-1] > 0.1  # (quiet while the spread is wide)

    found = saturated.active(call, check, seed=0)
    assert found == saturated.Active(0.01, None)
    assert asked == pytest.approx([0.6, 0.06])
    # a Function that refuses its scaled arguments says nothing
    assert saturated.active(call, lambda moved: (None, 0, True), seed=0) is None
