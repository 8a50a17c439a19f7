"""`gradscope sweep` as a library call: autograd and the engine's central difference along a
range, jumps and vanishing stretches picked out."""

from __future__ import annotations

import pytest

import gradscope
from gradscope.errors import UsageError
from gradscope.options import Options, Request
from gradscope.render.graph import sweep_words
from gradscope.tools.sweep import sweep
from tests.paths import DATA


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


# ------------------------------------------------------------------ words from the numbers
SEEDS = f"{DATA}/seed_layers.py"


def test_a_buggy_clamp_parts_where_the_picture_does():
    report = gradscope.sweep(f"{SEEDS}:ClampGradient", var="x", range=(-1, 2), points=61)
    (parted,) = report.parted  # autograd 1 where finite differences are 0, above the range
    assert parted["from"] == pytest.approx(1.0) and parted["to"] == pytest.approx(2.0)
    assert parted["autograd"] == 1.0 and parted["finite_difference"] == 0.0
    assert parted["apart"] == pytest.approx(1.0)
    # ...and each list drawn says so: autograd is 1 and FD is 0 at every point of it
    inside = [k for k, x in enumerate(report.x) if 1.02 < x <= 2]
    assert all(report.autograd[k] == 1 and report.finite_difference[k] == 0 for k in inside)
    assert [[round(a, 6), round(b, 6)] for a, b in report.zero["finite_difference"]] == [
        [-1.0, -0.05], [1.05, 2.0]]
    words = " ".join(w for w, _ in sweep_words(report))
    assert "part on x ∈ [1, 2]" in words and "follow each other" not in words
    assert "finite differences are 0 on [-1, -0.05] and [1.05, 2]" in words


def test_a_straight_through_round_parts_everywhere_between_its_jumps():
    report = gradscope.sweep(f"{SEEDS}:RoundGradient", var="x", range=(-1, 2), points=61)
    assert len(report.parted) == 1 and report.parted[0]["autograd"] == 1.0
    assert report.parted[0]["finite_difference"] == 0.0
    assert [round(j, 1) for j in report.jumps] == [-0.5, 0.5, 1.5]
    words = " ".join(w for w, _ in sweep_words(report))
    assert "autograd is nowhere 0" in words and "spike" in words


def test_a_smooth_function_follows_and_a_coarse_grid_says_how_coarse():
    report = gradscope.sweep("sin(3*x)", var="x", range="-3,3", points=80)
    assert report.parted == [] and report.jumps == []
    words = sweep_words(report)
    assert words == [("x is the target's only input", "dim"),
                     ("autograd and finite differences follow each other over the range; no "
                      "jumps seen", "green")]
    coarse = gradscope.sweep("sin(50*x)", var="x", range=(-1, 1), points=61)
    assert coarse.parted == []  # the quotient is far off, and knows it
    assert "own error at this spacing" in sweep_words(coarse)[1][0]


def test_an_abs_kink_is_no_parting():
    report = gradscope.sweep("abs(x)", var="x", range=(-3, 3), points=40)
    assert report.parted == [] and report.vanishing == 0


def test_the_api_takes_the_clis_keywords_and_saves(tmp_path):
    report = gradscope.sweep("x**2 * y", var="x", range=(0, 1), points=11, y="2",
                             plot=tmp_path / "s.svg")
    assert (tmp_path / "s.svg").read_text().startswith("<?xml")
    assert report.fixed["y"] == 2.0 and report.autograd[-1] == pytest.approx(4.0)
    report.save(tmp_path / "s.json")
    assert '"schema": "gradscope.sweep/1"' in (tmp_path / "s.json").read_text()
    with pytest.raises(UsageError, match="needs var="):
        gradscope.sweep("x**2")
    with pytest.raises(UsageError, match="expected LO,HI"):
        gradscope.sweep("x**2", var="x", range="1")
    old = gradscope.api.sweep(Request("check", "x**2"), "x", 0.0, 1.0, 5)  # the first form
    assert old.autograd[-1] == pytest.approx(2.0)


def test_from_python_its_messages_name_the_keywords_not_the_flags():
    import pytest

    import gradscope
    from gradscope.errors import UsageError

    with pytest.raises(UsageError, match=r"^var=y is not an input"):
        gradscope.sweep("x**2", var="y", range=(0, 1))
    with pytest.raises(UsageError, match=r"^points must be between"):
        gradscope.sweep("x**2", var="x", range=(0, 1), points=1)
