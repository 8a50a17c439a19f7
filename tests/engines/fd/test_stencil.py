"""The stencil: central differences, Richardson extrapolation and their error bounds."""

from __future__ import annotations

import math

import torch

from gradscope.engines.fd.stencil import STENCIL, central, estimate, richardson


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


def test_central_difference_of_a_scalar_function():
    assert abs(central(lambda x: torch.tensor(x ** 3, dtype=torch.float64), 2.0, 1e-4) - 12) < 1e-6
