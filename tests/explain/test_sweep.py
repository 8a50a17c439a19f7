"""Lines through an input: the range they sweep, whether they may move together, the readings
of real surrogate Functions along them, and a gate's edges placed by bisection."""

from __future__ import annotations

import torch

from gradscope.explain import sweep as sweep_module
from gradscope.explain.coarse import AGAINST, CONSISTENT, SCALED, UNKNOWN
from gradscope.explain.sweep import ALONE_POINTS, MIN_POINTS, POINTS, Sweep, span
from tests.data import branches

X = torch.linspace(-3, 3, 13, dtype=torch.float64)


def _sweep(fn, x=X, cost=13) -> Sweep:
    return Sweep(lambda v: fn(v["x"]), {"x": x}, "x", torch.ones_like(fn(x)), cost)


def test_the_range_holds_the_values_and_half_their_spread_again_inside_the_domain():
    assert span(X) == (-6.0, 6.0)
    assert span(torch.tensor([0.5], dtype=torch.float64)) == (-1.5, 2.5)  # at least 2 aside
    assert span(X, (0.0, float("inf"))) == (0.0, 6.0)
    assert span(torch.tensor([float("nan"), 1.0])) == (-1.0, 3.0)


def test_lines_move_together_only_where_each_output_follows_its_own_element():
    assert _sweep(branches.RoundSTE.apply).probe(-6, 6)
    assert not _sweep(branches.rounded_running_total).probe(-6, 6)
    assert not _sweep(lambda x: RoundSum.apply(x)).probe(-6, 6)  # a scalar output
    assert not _sweep(lambda x: torch.zeros_like(x) + x.detach() * 0).probe(-6, 6)  # nothing moves


class RoundSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return torch.round(x).sum()

    @staticmethod
    def backward(ctx, g):
        return g * torch.ones(13, dtype=torch.float64)


def _verdicts(fn, cost=13) -> torch.Tensor:
    s = _sweep(fn, cost=cost)
    s.probe(-6, 6)
    return s.check(torch.arange(13), -6.0, 6.0).reading.verdict


def test_real_surrogates_read_along_their_lines():
    assert bool((_verdicts(branches.RoundSTE.apply) == CONSISTENT).all())
    assert bool((_verdicts(branches.RoundSTETwice.apply) == SCALED).all())
    assert bool((_verdicts(branches.SignSTEWideWindow.apply) == SCALED).all())
    assert bool((_verdicts(branches.SpikeFlipped.apply) == AGAINST).all())
    assert bool((_verdicts(branches.SpikeAtan.apply) == CONSISTENT).all())


def test_lines_through_code_that_is_not_elementwise_move_one_element_at_a_time():
    s = _sweep(branches.rounded_running_total_twice)
    assert not s.probe(-6, 6)
    coarse = s.check(torch.tensor([0, 5]), -6.0, 6.0)
    assert not coarse.together and bool((coarse.reading.verdict == SCALED).all())


def test_a_gate_is_placed_between_grid_positions():
    s = _sweep(branches.SignSTE.apply)
    s.probe(-6, 6)
    lo, hi = s.check(torch.arange(13), -6.0, 6.0).edges
    assert torch.allclose(lo, torch.full_like(lo, -1.0), atol=1e-3)
    assert torch.allclose(hi, torch.full_like(hi, 1.0), atol=1e-3)


def test_values_the_target_refuses_leave_the_line_unknown():
    def picky(x):
        if bool((x.abs() > 5).any()):
            raise ValueError("out of range")
        return branches.RoundSTE.apply(x)

    assert bool((_verdicts(picky) == UNKNOWN).all())


def test_positions_follow_what_an_evaluation_costs(monkeypatch):
    together = _sweep(torch.round)
    together.elementwise = True
    assert together.points(1) == POINTS
    alone = _sweep(torch.round)  # a whole evaluation per position: fewer, shared by lines
    assert alone.points(1) == ALONE_POINTS and alone.points(4) == MIN_POINTS
    assert _sweep(torch.round, cost=10**9).points(1) == MIN_POINTS
    monkeypatch.setattr(sweep_module, "WORK", 1e5)
    assert _sweep(torch.round, cost=5000).points(1) == MIN_POINTS
    assert _sweep(torch.round, cost=1000).points(1) == 101  # (odd: the middle is a position)


def test_a_line_finds_a_forward_the_probe_values_miss():
    # the output moves only for x[0] in (4.2, 4.3): no probe value lands there, a line does
    def narrow(v):
        return ((v["x"][0] > 4.2) & (v["x"][0] < 4.3)).double() + 0 * v["x"].sum()

    s = Sweep(narrow, {"x": X}, "x", torch.ones(()), 13)
    assert s.moves(torch.tensor([0, 1]), -6.0, 6.0).tolist() == [True, False]
