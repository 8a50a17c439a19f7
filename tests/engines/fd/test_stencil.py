"""The stencil: central differences, Richardson extrapolation and their error bounds, kinks
found from f itself."""

from __future__ import annotations

import math

import torch

from gradscope.engines.fd.stencil import (
    STENCIL,
    central,
    estimate,
    kinked,
    kinked_reusing,
    richardson,
    richardson_reusing,
    second_difference,
)


def _points(f, x: float, h: float, n: int) -> list[torch.Tensor]:
    return [torch.tensor(f(x + s * h), dtype=torch.float64) for s in STENCIL[:n]]


def test_two_points_carry_round_off_only_four_points_extrapolate():
    h = torch.tensor(1e-3, dtype=torch.float64)
    two, two_err = estimate(_points(math.exp, 0.5, 1e-3, 2), h)
    four, four_err = estimate(_points(math.exp, 0.5, 1e-3, 4), h)
    exact = math.exp(0.5)
    assert abs(float(two) - exact) > abs(float(four) - exact)  # truncation: h² vs h⁴
    assert abs(float(four) - exact) <= float(four_err)
    assert float(two_err) < 1e-10  # round-off only


def test_richardson_matches_estimate_with_four_points():
    h = torch.tensor(1e-2, dtype=torch.float64)
    pts = _points(math.sin, 1.0, 1e-2, 4)
    assert torch.equal(richardson(*pts, h)[0], estimate(pts, h)[0])


def test_a_refinement_reusing_a_two_point_pass_is_the_four_point_estimate():
    for f, x, h in [(math.sin, 1.0, 1e-2), (math.exp, -3.0, 1e-4), (lambda t: t ** 5, 2.0, 1e-3)]:
        ht = torch.tensor(h, dtype=torch.float64)
        pts = _points(f, x, h, 4)
        d1, err1 = estimate(pts[:2], ht)
        full, reused = richardson(*pts, ht), richardson_reusing(d1, err1, pts[2], pts[3], ht)
        assert torch.allclose(full[0], reused[0], rtol=1e-14)
        assert torch.allclose(full[1], reused[1], rtol=1e-12)


def test_central_difference_of_a_scalar_function():
    assert abs(central(lambda x: torch.tensor(x ** 3, dtype=torch.float64), 2.0, 1e-4) - 12) < 1e-6


def _kinked(f, x: float, h: float = 1e-4) -> bool:
    """`kinked`, checked to say the same as `kinked_reusing` on a two-point pass's values."""
    base = torch.tensor(f(x), dtype=torch.float64)
    pts, ht = _points(f, x, h, 4), torch.tensor(h, dtype=torch.float64)
    found = bool(kinked(base, pts, ht))
    d1, err1 = estimate(pts[:2], ht)
    reused = kinked_reusing(second_difference(pts[0], pts[1], base), err1, d1, base,
                            pts[2], pts[3], ht)
    assert bool(reused) == found, (f, x)
    return found


def test_a_slope_jump_inside_the_stencil_is_found_from_f_itself():
    def leaky(x):
        return x if x > 0 else 0.1 * x

    assert _kinked(leaky, 0.0) and _kinked(leaky, 1e-5)  # the kink within h/4 of x
    assert _kinked(abs, -2e-5)


def test_smooth_functions_and_far_kinks_are_not_kinks():
    for f, x in [(math.exp, 0.5), (math.sin, 3.0), (lambda x: x ** 3, 0.0),
                 (lambda x: max(x, 0.0), 1.0), (lambda x: 1e6 * x * x, 0.0)]:
        assert not _kinked(f, x)


def test_round_off_of_large_cancelling_terms_is_not_a_kink():
    # (x + 1e4) − 1e4: f is x, its round-off that of 1e4 (far above what |f| suggests), and
    # the second differences are pure noise of either sign
    for x in torch.linspace(-1, 1, 41, dtype=torch.float64).tolist():
        assert not _kinked(lambda t: (t + 1e4) - 1e4 + 1e-3 * t, x)


def test_a_slope_change_below_root_eps_of_the_slope_is_not_a_kink():
    assert not _kinked(lambda x: 1e3 * x + (1e-9 * x if x > 0 else 0.0), 0.0)


def test_a_jump_is_left_to_convergence():
    # the central differences of a jump grow as 1/h: the extrapolation's error estimate says so
    pts = _points(lambda x: float(x > 0), 3e-5, 1e-4, 4)
    est, err = estimate(pts, torch.tensor(1e-4, dtype=torch.float64))
    assert float(err) > 0.1 * abs(float(est)) > 0
