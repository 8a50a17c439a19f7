"""Dense inputs: a Jacobian column per element, two points first, refined into a new estimate on
demand; kinks and unconverged columns retried with smaller steps."""

from __future__ import annotations

import torch

from gradscope.engines.fd.engine import FiniteDifferences
from gradscope.engines.fd.policy import DEFAULT_EPS
from tests.engines.fd import fd_of as _fd
from tests.engines.fd import python_fd_of
from tests.paths import DATA


def test_dense_jacobian_columns():
    fd, _ = _fd("softmax(x)", x=[1.0, 2.0, 3.0])
    jac, _ = fd.estimate("x").jacobian()
    want = torch.autograd.functional.jacobian(lambda z: torch.softmax(z, 0),
                                              torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64))
    assert torch.allclose(jac, want, atol=1e-10)


def test_jump_without_branch_info_is_caught_by_convergence():
    # A traced function that reports no branches: the error estimate must expose the jump.
    def traced(values):
        return torch.floor(values["x"]), []

    fd = FiniteDifferences(traced, {"x": torch.tensor([1.0, 0.3], dtype=torch.float64)},
                           eps=DEFAULT_EPS, elementwise={"x"}, two_point_from=1)
    col = fd.estimate("x")
    # the two-point estimate at the jump is huge (1/2h) and not yet known to be wrong; a
    # comparison doubts it, and the extrapolated estimate then shows it never converges
    assert float(col.partial[0]) > 1e3 and col.kink.tolist() == [False, False]
    col, _ = fd.refine(col, torch.tensor([True, True]))
    assert col.kink.tolist() == [True, False]


def test_dense_columns_start_with_two_points_and_refine_on_demand():
    fd, _ = _fd("sum(exp(x))", x=[0.1, 0.2, 0.3])
    first = fd.estimate("x")
    assert first.points.tolist() == [2, 2, 2] and first.forward_calls == 6
    col, count = fd.refine(first, torch.tensor([False, True, False]))
    assert count == 1 and first.points.tolist() == [2, 2, 2]
    # (the refined column reuses its two-point pass: two calls at ±h/2, not four)
    assert col.points.tolist() == [2, 4, 2] and col.forward_calls == 8
    x = torch.tensor([0.1, 0.2, 0.3], dtype=torch.float64)
    assert torch.allclose(col.partial[0], torch.exp(x), rtol=1e-7)
    assert float(col.error[0, 1]) > float(col.error[0, 0])  # now with a truncation bound
    assert fd.refine(col, torch.tensor([False, True, False]))[1] == 0  # already refined


def test_python_jump_is_found_after_refinement():
    import gradscope

    report = gradscope.check(f"{DATA}/functions.py:floor_plus", x="1.0,0.3,2.5")
    assert report.inputs[0].element_status == ["nondifferentiable", "ok", "ok"]
    assert report.passed


def test_a_refinement_reusing_the_two_point_pass_still_finds_a_kink():
    def leaky(x):
        return torch.where(x > 0, x, 0.1 * x).sum()

    fd = python_fd_of(leaky, torch.tensor([0.0, 0.5, -1.0], dtype=torch.float64))
    first = fd.estimate("x")
    assert first.points.tolist() == [2, 2, 2] and first.kink.tolist() == [False] * 3
    assert first.second is not None and bool(torch.isfinite(first.second).all())
    col, count = fd.refine(first, torch.ones(3, dtype=torch.bool))
    assert count == 3 and col.kink.tolist() == [True, False, False]
    assert torch.allclose(col.partial[0, 1:], torch.tensor([1.0, 0.1], dtype=torch.float64))
    assert col.points[1:].tolist() == [4, 4]


def test_round_off_swamped_columns_are_retried_at_larger_steps():
    # float32 round-off of the largest output (|f| ≈ 216) swamps every column at h = 1e-6·x
    x = torch.tensor([1.3, 3.8, -3.8, -6.0, 6.0, -1.3], dtype=torch.float64)

    def traced(values):
        return values["x"].float() ** 3, []

    fd = FiniteDifferences(traced, {"x": x}, eps=1e-6, elementwise=set())
    est, _ = fd.refine(fd.estimate("x"), torch.ones(6, dtype=torch.bool))
    assert not bool(est.kink.any()) and est.noisy is None and est.widened == 6
    jac, err = est.jacobian()
    assert torch.allclose(jac.diagonal(), 3 * x * x, rtol=1e-2)
    assert bool((err.amax(0) < 1e-2 * (3 * x * x + 1)).all())


def test_columns_round_off_no_step_beats_are_unchecked_never_kinks():
    x = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)

    def traced(values):
        return values["x"].half() + 1000, []

    fd = FiniteDifferences(traced, {"x": x}, eps=1e-6, elementwise=set())
    est, _ = fd.refine(fd.estimate("x"), torch.ones(3, dtype=torch.bool))
    assert not bool(est.kink.any())
    assert est.noisy is not None and est.noisy.tolist() == [True, True, True]
    assert est.checked is not None and not bool(est.checked.any())
