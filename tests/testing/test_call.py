"""What a gradcheck call checks and how gradscope's copies reach `func`: zero-element tensors
are nothing to compare, views keep their layout (storage offset, strides) so `as_strided` and
stride-dependent code see what they saw in the caller's tensor."""

from __future__ import annotations

import sys

import torch

import gradscope
from gradscope.testing.call import GradcheckCall, in_layout, unusual_layout
from tests.testing import leaf

TORCH = sys.modules["torch.autograd.gradcheck"]



def test_zero_element_inputs_are_passed_but_not_checked():
    x, empty = leaf(3), torch.zeros(0, 2, dtype=torch.float64, requires_grad=True)
    call = GradcheckCall.of(lambda a, b: a.sin() + b.sum(), (x, empty))
    assert call.checked == [0] and call.empty == ["input 1 (0, 2)"]
    assert not call.nothing_to_compare


def test_nothing_to_compare_when_every_input_or_output_is_empty():
    empty = torch.zeros(0, dtype=torch.float64, requires_grad=True)
    assert GradcheckCall.of(lambda t: t * 2, (empty,)).nothing_to_compare
    call = GradcheckCall.of(lambda t: t[:0], (leaf(3),))
    assert call.nothing_to_compare and call.empty == ["output 0 (0,)"]


def test_empty_calls_pass_and_are_counted_apart_never_as_a_pass():
    from gradscope.testing.stats import STATS
    from gradscope.testing.switch import summary

    passed, nothing = STATS.passed, sum(STATS.nothing.values())
    empty = torch.zeros(0, 3, dtype=torch.float64, requires_grad=True)
    for fast in (False, True):
        assert gradscope.gradcheck(lambda t: t @ torch.ones(3, 2, dtype=torch.float64),
                                   (empty,), fast_mode=fast)
    assert STATS.passed == passed and sum(STATS.nothing.values()) == nothing + 2
    assert "with nothing to compare" in summary()


def test_a_wrong_gradient_beside_an_empty_input_still_fails():
    class Double(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, e):
            return x * 3 + e.sum()

        @staticmethod
        def backward(ctx, g):
            return g * 2, None  # should be 3

    empty = torch.zeros(0, dtype=torch.float64, requires_grad=True)
    assert not gradscope.gradcheck(Double.apply, (leaf(3), empty), raise_exception=False)


def test_unusual_layouts_are_recognised():
    base = torch.randn(20, dtype=torch.float64)
    assert not unusual_layout(base)
    assert unusual_layout(base[4:10])  # a storage offset
    assert unusual_layout(base.reshape(4, 5).t())  # strides
    assert unusual_layout(base[:6])  # part of a larger storage


def test_in_layout_keeps_offset_strides_and_gradients():
    storage = torch.arange(12, dtype=torch.float64)
    like = storage.as_strided((2, 2), (1, 3), 5)
    t = torch.tensor([[10.0, 20.0], [30.0, 40.0]], dtype=torch.float64, requires_grad=True)
    placed = in_layout(t, like)
    assert placed.stride() == like.stride() and placed.storage_offset() == 5
    assert torch.equal(placed.detach(), t.detach())
    # the rest of the storage is the caller's: as_strided over it reads the same values
    assert float(placed.detach().as_strided((1,), (1,), 0)) == 0.0
    placed.sum().backward()
    assert torch.equal(t.grad, torch.ones(2, 2, dtype=torch.float64))


def test_as_strided_over_a_view_with_an_offset_passes_as_in_torch():
    storage = torch.randn(10, dtype=torch.float64)
    x = storage[2:8].detach().requires_grad_(True)  # offset 2 into a storage of 10

    def fn(t):  # OpInfo's as_strided.partial_views: offsets relative to the whole storage
        return torch.as_strided(t, (2, 2), (1, 2), t.storage_offset() + 1)

    for fast in (False, True):
        assert TORCH.gradcheck(fn, (x,), fast_mode=fast)
        assert gradscope.gradcheck(fn, (x,), fast_mode=fast)


def test_a_transposed_input_reaches_func_transposed():
    seen = []

    def fn(t):
        seen.append(t.is_contiguous())
        return t.sin()

    x = torch.randn(3, 4, dtype=torch.float64).t().requires_grad_(True)
    assert gradscope.gradcheck(fn, (x,))
    assert seen and not any(seen)
