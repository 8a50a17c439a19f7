"""Elementwise inputs: every element perturbed at once, two or four calls a round, refined into a
new estimate where doubted."""

from __future__ import annotations

import torch

from tests.engines.fd import fd_of as _fd


def test_small_elementwise_input_costs_four_calls_and_is_extrapolated():
    x = torch.linspace(-1, 1, 1000, dtype=torch.float64)
    fd, _ = _fd("exp(x) * y", x=x.tolist(), y=[2.0] * 1000)
    col = fd.estimate("x")
    assert col.mode == "elementwise" and col.forward_calls == 4
    assert col.points.unique().tolist() == [4]
    grad, err = col.vjp(torch.ones(1000, dtype=torch.float64))
    assert torch.allclose(grad, 2 * torch.exp(x), rtol=1e-11)
    assert bool((err < 1e-8).all()) and bool((err > 0).all())


def test_large_elementwise_input_costs_two_calls_whatever_its_size():
    x = torch.linspace(-1, 1, 10000, dtype=torch.float64)
    fd, _ = _fd("exp(x) * y", x=x.tolist(), y=[2.0] * 10000, two_point_from=10000)
    col = fd.estimate("x")
    assert col.mode == "elementwise" and col.forward_calls == 2
    assert col.points.unique().tolist() == [2]
    grad, err = col.vjp(torch.ones(10000, dtype=torch.float64))
    want = 2 * torch.exp(x)
    assert torch.allclose(grad, want, rtol=1e-8)  # h²/6 truncation, h = 1e-4
    assert bool((err < 1e-10).all()) and bool((err > 0).all())  # round-off only


def test_elementwise_refinement_extrapolates_only_the_doubted_elements():
    x = torch.linspace(-1, 1, 1000, dtype=torch.float64)
    fd, _ = _fd("exp(3*x)", x=x.tolist(), two_point_from=1)
    first = fd.estimate("x")
    before = first.partial.clone()
    doubted = torch.zeros(1000, dtype=torch.bool)
    doubted[[3, 500, 999]] = True
    col, count = fd.refine(first, doubted)
    assert count == 3 and col is not first and torch.equal(first.partial, before)
    assert bool((first.points == 2).all())  # estimates are immutable: a new one is made
    assert col.forward_calls == 2 + 4
    assert col.points[doubted].tolist() == [4, 4, 4] and int((col.points == 2).sum()) == 997
    want = 3 * torch.exp(3 * x)
    assert torch.equal(col.partial[~doubted], before[~doubted])
    refined = (col.partial[doubted] - want[doubted]).abs() / want[doubted]
    two_point = (before[doubted] - want[doubted]).abs() / want[doubted]
    assert bool((refined < 1e-11).all()) and bool((two_point > 1e-9).all())
    assert bool((col.error[doubted] < 1e-7 * want[doubted]).all())
    assert fd.refine(col, doubted) == (col, 0)  # already refined
