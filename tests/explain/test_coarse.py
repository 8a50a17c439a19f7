"""The coarse-scale reading of a surrogate: consistent straight-through estimators, gates and
bumps pass; a scaled or too-wide straight-through estimator, a sign flipped on one side, and a
bump against the forward do not; lines that cannot tell say so."""

from __future__ import annotations

import torch

from gradscope.explain.coarse import AGAINST, CONSISTENT, SCALED, UNKNOWN, Lines, read

T = torch.linspace(-8, 8, 1601, dtype=torch.float64)


def _verdict(forward, slope, unit: float = 1.0) -> int:
    lines = Lines(T, forward(T).unsqueeze(1), slope(T).unsqueeze(1),
                  torch.tensor([unit], dtype=torch.float64))
    return int(read(lines).verdict[0])


def _bump(t, width=0.05):
    return 1 / (1 + (t / width) ** 2) / (torch.pi * width)  # integrates to about 1


def test_straight_through_estimators_that_match_the_forward_are_consistent():
    ones = torch.ones_like
    assert _verdict(torch.round, ones) == CONSISTENT  # identity through a staircase
    assert _verdict(torch.sign, lambda t: (t.abs() <= 1).double()) == CONSISTENT  # hardtanh gate
    assert _verdict(lambda t: 0.5 * torch.round(2 * t), ones) == CONSISTENT  # finer steps
    # gradient passed on unchanged through a forward that saturates: the textbook estimator
    assert _verdict(lambda t: t.clamp(-1, 1).round(), ones) == CONSISTENT


def test_scaled_or_too_wide_straight_through_estimators_are_not():
    assert _verdict(torch.round, lambda t: 2 * torch.ones_like(t)) == SCALED
    assert _verdict(torch.round, lambda t: 0.5 * torch.ones_like(t)) == SCALED
    assert _verdict(torch.sign, lambda t: (t.abs() <= 3).double()) == SCALED
    assert _verdict(torch.sign, lambda t: 2 * torch.ones_like(t)) == SCALED  # not identity


def test_a_gated_box_may_be_up_to_twice_its_jump_an_ungated_slope_may_not():
    heaviside = lambda t: (t > 0).double()  # noqa: E731
    # the common rectangular spike surrogate: height 1 over |v| ≤ 1, twice the jump of 1
    assert _verdict(heaviside, lambda t: (t.abs() <= 1).double()) == CONSISTENT
    assert _verdict(heaviside, lambda t: (t.abs() <= 1.5).double()) == SCALED  # three times
    assert _verdict(torch.round, lambda t: 1.9 * torch.ones_like(t)) == SCALED  # ungated


def test_identity_is_relative_to_the_upstream():
    # vᵀf with v = 0.5: passing the gradient on unchanged gives a slope of 0.5, not 1
    assert _verdict(lambda t: 0.5 * torch.round(t), lambda t: 0.5 * torch.ones_like(t),
                    unit=0.5) == CONSISTENT
    assert _verdict(lambda t: 0.5 * torch.round(t), torch.ones_like, unit=0.5) == SCALED


def test_bumps_are_judged_by_direction_not_scale():
    heaviside = lambda t: (t > 0).double()  # noqa: E731
    assert _verdict(heaviside, _bump) == CONSISTENT
    assert _verdict(heaviside, lambda t: 0.08 * _bump(t)) == CONSISTENT  # snnTorch's scale
    assert _verdict(heaviside, lambda t: torch.sign(t) * _bump(t)) == AGAINST  # flipped side
    assert _verdict(heaviside, lambda t: -_bump(t)) == AGAINST  # against the step


def test_a_forward_that_goes_both_ways_is_not_judged_by_direction():
    # a square wave steps up and down: a surrogate whose sign changes along it is no evidence
    square = lambda t: (torch.floor(t) % 2)  # noqa: E731
    assert _verdict(square, lambda t: torch.cos(torch.pi * t)) != AGAINST


def test_lines_that_cannot_tell_are_unknown():
    zero = torch.zeros_like
    assert _verdict(zero, torch.ones_like) == UNKNOWN  # the forward never moves here
    assert _verdict(torch.round, zero) == UNKNOWN  # no surrogate on this line
    assert _verdict(lambda t: torch.where(t > 7, float("nan"), torch.round(t)),
                    torch.ones_like) == UNKNOWN


def test_the_reading_reports_ratio_gate_and_constant():
    lines = Lines(T, torch.sign(T).unsqueeze(1), (T.abs() <= 3).double().unsqueeze(1),
                  torch.ones(1, dtype=torch.float64))
    r = read(lines)
    assert abs(float(r.ratio[0]) - 3) < 0.01 and float(r.constant[0]) == 1.0
    assert bool(r.gated[0]) and float(r.lo[0]) == -3 and float(r.hi[0]) == 3


def test_a_gate_placed_between_grid_positions_makes_its_integral_exact():
    from gradscope.explain.coarse import with_edges

    coarse_grid = torch.linspace(-8, 8, 65, dtype=torch.float64)  # spacing 0.25
    lines = Lines(coarse_grid, torch.sign(coarse_grid).unsqueeze(1),
                  (coarse_grid.abs() <= 1.1).double().unsqueeze(1),
                  torch.ones(1, dtype=torch.float64))
    r = with_edges(read(lines), torch.tensor([-1.1], dtype=torch.float64),
                   torch.tensor([1.1], dtype=torch.float64))
    assert abs(float(r.ratio[0]) - 1.1) < 1e-12 and int(r.verdict[0]) == CONSISTENT
    wide = with_edges(read(lines), torch.tensor([-3.5]), torch.tensor([3.5]))
    assert int(wide.verdict[0]) == SCALED  # (edges say wider: the verdict follows them)
    # an edge left unplaced (the range bounds it) is the grid's own
    unplaced = with_edges(read(lines), torch.tensor([float("nan")]),
                          torch.tensor([float("nan")]))
    assert float(unplaced.integral[0]) == 2.0
