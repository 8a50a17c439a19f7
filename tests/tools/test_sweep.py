"""`gradscope sweep` as a library call: autograd and the engine's central difference along a
range, jumps and vanishing stretches picked out."""

from __future__ import annotations

import pytest

from gradscope.errors import UsageError
from gradscope.options import Options, Request
from gradscope.tools.sweep import sweep


def test_sweep_round_shows_zero_autograd_and_spikes_at_half_integers():
    report = sweep(Request("check", "round(x)"), "x", -2.0, 2.0, 120)
    assert all(g == 0.0 for g in report.autograd)
    assert report.vanishing > 100
    assert len(report.jumps) == 4
    for want, got in zip([-1.5, -0.5, 0.5, 1.5], report.jumps, strict=True):
        assert abs(got - want) < 0.04


def test_sweep_smooth_function_agrees():
    report = sweep(Request("check", "x**3 * y", Options(at={"y": "2"})), "x", -1.0, 1.0, 50)
    assert report.jumps == [] and report.vanishing == 0
    for x, ag in zip(report.x, report.autograd, strict=True):
        assert ag == pytest.approx(6 * x * x)


def test_sweep_refuses_a_swept_input_that_is_also_given():
    with pytest.raises(UsageError, match="do not also give it with --at"):
        sweep(Request("check", "x * y", Options(at={"x": "1"})), "x", 0.0, 1.0, 5)
