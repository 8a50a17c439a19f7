"""Kinks compared as subgradients: at an element whose stencil crossed a kink, autograd must
lie between the one-sided derivatives; wrong twins that passed with nothing compared now fail,
and torch's conventions (relu, clamp, abs, max and sort ties, a jump) pass."""

import pytest
import torch

import gradscope
from gradscope.features import subgradients
from gradscope.report.status import Status

DATA = "tests/data/kinked.py"


def _note(report):
    return next((n for n in report.notes if "compared as subgradients" in n), "")


@pytest.mark.parametrize("target", ["abs_off_loss", "relu_off_loss"])
def test_a_backward_outside_the_one_sided_derivatives_at_a_kink_fails(target):
    report = gradscope.check(f"{DATA}:{target}", at={"x": "zeros(2,3)"})
    assert not report.passed
    assert report.inputs[0].status == Status.MISMATCH
    assert "lie outside, a mismatch" in _note(report)


@pytest.mark.parametrize(("expr", "at"), [
    ("sum(abs(x))", {"x": "zeros(4)"}),
    ("sum(relu(x))", {"x": "zeros(5)"}),
    ("sum(clamp(x, 0, 1))", {"x": "[0, 1, 0.5]"}),
    ("sum(round(x))", {"x": "[0.5, 1.5]"}),  # (a jump: any value between 0 and 1/h)
    ("sum(maximum(x, y))", {"x": "[1, 2]", "y": "[1, 2]"}),
    ("max(x)", {"x": "[1, 1, 1]"}),
    ("sum(sort(x)[0] * x)", {"x": "[1, 1, 1]"}),
    ("sum(abs(x) * y)", {"x": "[0, 0]", "y": "[1, -2]"}),
])
def test_torchs_conventions_at_a_kink_lie_inside_and_pass(expr, at):
    report = gradscope.check(expr, at=at)
    assert report.passed, report.to_text()
    assert "every one lies inside" in _note(report)


def test_torchs_convention_at_a_tie_of_its_own_ops_is_said_never_a_mismatch():
    # fmax(x, y) + fmin(x, y) is x + y, yet at x = y autograd gives x all of it (2 and 0):
    # outside the one-sided derivatives (1 and 1), but torch's own convention at a tie
    report = gradscope.check("torch.fmax(x, y) + torch.fmin(x, y)",
                             at={"x": "[1, 2]", "y": "[1, 3]"})
    assert report.passed, report.to_text()
    assert "lie outside at a tie of torch's own ops" in _note(report)


def test_a_right_twin_at_its_kinks_passes():
    for target in ("abs_loss", "max_of_ties"):
        assert gradscope.check(f"{DATA}:{target}", at={"x": "zeros(2,3)"}).passed


def test_the_measured_kinks_are_bounded_by_the_work_they_cost(monkeypatch):
    monkeypatch.setattr(subgradients, "MAX_KINKS", 2)
    report = gradscope.check("sum(abs(x))", at={"x": "zeros(5)"})
    assert report.passed and _note(report).startswith("x: 2 element(s) at a kink")
    monkeypatch.setattr(subgradients, "MAX_WORK", 0.0)  # nothing affordable: no claim
    assert not _note(gradscope.check("sum(abs(x))", at={"x": "zeros(5)"}))


def test_the_interval_follows_the_upstream():
    sides = subgradients.Sides(torch.tensor([0]), torch.tensor([[1.0, 0.0]]),
                               torch.tensor([[-1.0, 2.0]]), torch.zeros(1, 2),
                               torch.tensor([True]))
    low, high, slack = subgradients._interval(sides, torch.tensor([1.0, 1.0]))
    assert (low.item(), high.item(), slack.item()) == (1.0, 1.0, 0.0)
    low, high, _ = subgradients._interval(sides, torch.tensor([-1.0, 0.0]))
    assert (low.item(), high.item()) == (-1.0, 1.0)
