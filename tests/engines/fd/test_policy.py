"""The one step policy: the default, an element's step, the step for a target computing in a
lower precision, and the range a step may take."""

from __future__ import annotations

import torch

from gradscope.engines.fd.policy import (
    DEFAULT_EPS,
    MAX_EPS,
    MIN_EPS,
    clamped,
    eps_for,
    low_precision_eps,
    scalar_step,
    step_of,
)


def test_the_step_of_an_element_is_relative_past_one():
    x = torch.tensor([0.0, 0.5, -3.0, 100.0], dtype=torch.float64)
    assert torch.allclose(step_of(x, 1e-4), torch.tensor([1e-4, 1e-4, 3e-4, 1e-2],
                                                         dtype=torch.float64))
    assert x.tolist() == [0.0, 0.5, -3.0, 100.0]  # a new tensor
    assert abs(scalar_step(-3.0, 1e-4) - 3e-4) < 1e-18 and scalar_step(0.2, 1e-4) == 1e-4


def test_the_step_of_a_run():
    assert eps_for(None, torch.float64, torch.float64) == DEFAULT_EPS
    assert eps_for(1e-6, torch.float32, torch.float64) == 1e-6  # given: used as is
    lower = eps_for(None, torch.float32, torch.float64)  # computes below what it is given
    assert lower == low_precision_eps(torch.float32) and 4e-3 < lower < 6e-3
    assert eps_for(None, torch.float32, torch.float32) == DEFAULT_EPS


def test_a_step_is_kept_in_range():
    assert clamped(0.0) == MIN_EPS and clamped(1.0) == MAX_EPS and clamped(1e-6) == 1e-6
