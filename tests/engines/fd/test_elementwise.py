"""Elementwise inputs: every element perturbed at once, two or four calls a round, refined into a
new estimate where doubted."""

from __future__ import annotations

import torch

from gradscope.engines.fd import FiniteDifferences
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


def _coarse(fn, x, eps, elementwise=True):
    def traced(values):
        return fn(values["x"]), []

    return FiniteDifferences(traced, {"x": x}, eps=eps, elementwise={"x"} if elementwise
                             else set(), two_point_from=1 << 30)


def test_round_off_swamped_elements_are_retried_at_larger_steps_not_taken_for_kinks():
    x = torch.linspace(1.0, 6.0, 25, dtype=torch.float64)
    fd = _coarse(lambda v: v.float() ** 3, x, eps=1e-6)  # float32 round-off at h = 1e-6·x
    est = fd.estimate("x")
    assert not bool(est.kink.any()) and est.noisy is None
    assert est.widened == 25
    assert torch.allclose(est.partial, 3 * x * x, rtol=5e-3)
    assert bool((est.error < 1e-2 * (3 * x * x)).all())


def test_a_step_that_suits_the_precision_is_never_widened():
    x = torch.linspace(1.0, 6.0, 25, dtype=torch.float64)
    est = _coarse(lambda v: v.float() ** 3, x, eps=1e-2).estimate("x")
    assert est.widened == 0 and est.noisy is None and not bool(est.kink.any())


def test_round_off_no_step_beats_is_unchecked_never_a_kink():
    # float16 rounds 1000 + x to 0.5: no step up to 0.1 of x moves it by more than an ulp or two
    x = torch.linspace(1.0, 3.0, 5, dtype=torch.float64)
    fd = _coarse(lambda v: v.half() + 1000, x, eps=1e-6)
    est = fd.estimate("x")
    assert not bool(est.kink.any())
    assert est.noisy is not None and bool(est.noisy.all())
    assert est.checked is not None and not bool(est.checked.any())


def test_a_jump_stays_a_kink_when_steps_widen():
    # floor's jump at 1.0 swamps every step with 1/h, not with round-off: a kink, never noise
    x = torch.tensor([1.0, 0.3], dtype=torch.float64)
    est = _coarse(lambda v: torch.floor(v.float()), x, eps=1e-6).estimate("x")
    assert est.kink.tolist() == [True, False] and est.noisy is None
