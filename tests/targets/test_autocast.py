"""--autocast DTYPE: autograd's forward under torch.autocast with float32 inputs, finite
differences without it, tolerances float32's widened element by element by what autocast
changed (never the whole check at the lowest precision an op ran in); a
custom_fwd/custom_bwd Function with a wrong backward fails with its culprit named, a right one
passes; the note says which ops ran in low precision."""

from __future__ import annotations

import pytest
import torch

import gradscope
from gradscope.errors import UsageError
from gradscope.targets.autocast import Autocast
from tests.paths import DATA

MIXED = f"{DATA}/mixed.py"


def test_the_first_forward_is_watched_for_each_ops_precision():
    seen = Autocast("cpu", "bfloat16")
    run = seen.wrap(lambda v: torch.tanh(v["x"] @ v["w"]).sum())
    run({"x": torch.randn(3, 4), "w": torch.randn(4, 2)})
    assert seen.lowest == torch.bfloat16 and "matmul" in seen.low
    assert "bfloat16: matmul" in seen.note()
    plain = Autocast("cpu", "bfloat16")
    plain.wrap(lambda v: v["x"].exp())({"x": torch.randn(3)})
    assert plain.lowest is None and "nothing (no op on autocast's list ran)" in plain.note()


def test_a_right_custom_bwd_passes_in_bfloat16():
    report = gradscope.check(f"{MIXED}:Head", shape={"x": (3, 8)}, autocast="bfloat16")
    assert report.passed, report.to_text()
    assert report.dtype == "float32"
    # float32's, though linear ran in bfloat16: what it changed widens each element instead
    assert report.tolerances["rtol"] == pytest.approx(5e-4)
    assert any("in bfloat16: linear" in n and "widened element by element" in n
               for n in report.notes)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_float32_backward_8_percent_wrong_behind_one_bfloat16_matmul_fails(seed):
    wrong = gradscope.check(f"{MIXED}:HeadEight", shape={"x": (3, 8)}, autocast="bfloat16",
                            seed=seed)
    assert not wrong.passed, wrong.to_text()
    right = gradscope.check(f"{MIXED}:Head", shape={"x": (3, 8)}, autocast="bfloat16",
                            seed=seed)
    assert right.passed, right.to_text()


def test_a_wrong_custom_bwd_fails_with_its_culprit():
    report = gradscope.check(f"{MIXED}:HeadBug", shape={"x": (3, 8)}, autocast="bfloat16")
    assert not report.passed
    culprits = [d for d in report.diagnostics if d.kind == "culprit"]
    assert culprits and "ScaledTanhBug.backward (mixed.py:34)" in culprits[0].message


def test_plain_torch_and_expressions_pass_in_both_dtypes():
    shapes = {"x": (4, 3), "w1": (3, 5), "w2": (5, 2)}
    assert gradscope.check(f"{MIXED}:mlp", shape=shapes, autocast="bfloat16").passed
    assert gradscope.check("sin(x @ y)", shape={"x": (3, 4), "y": (4, 2)},
                           autocast="float16").passed


def test_without_autocast_the_same_model_checks_in_float64():
    report = gradscope.check(f"{MIXED}:Head", shape={"x": (3, 8)})
    assert report.passed and report.dtype == "float64"
    assert not any("--autocast" in n for n in report.notes)


@pytest.mark.parametrize("options, said", [
    ({"dtype": "bfloat16"}, "leave out --dtype bfloat16"),
    ({"order": 2}, "--order 2"),
    ({"compile": "eager"}, "--compile"),
    ({}, None)])
def test_what_autocast_is_not_combined_with(options, said):
    if said is None:
        with pytest.raises(UsageError, match=r"autocast.*allowed: bfloat16, float16"):
            gradscope.check("x * 2", autocast="int8")
        return
    with pytest.raises(UsageError, match=said):
        gradscope.check("x * 2", autocast="bfloat16", **options)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_a_custom_bwd_5_percent_wrong_only_in_half_precision_fails_naming_it(dtype):
    # right in float32 (the autocast-free twin agrees with finite differences), 5 % too large
    # on its half-precision path: within what autocast's widening believes of bfloat16, so
    # only its call under autocast, checked in place, shows it — a common factor that held
    # on a fresh gradient — and its derivative in its place moves the target's gradient
    for seed in range(2):
        report = gradscope.check(f"{MIXED}:HalfOnlyHeadSlight", shape={"x": (3, 8)},
                                 autocast=dtype, seed=seed)
        assert not report.passed, report.to_text()
        culprit = next(d for d in report.diagnostics if d.kind == "culprit")
        assert "SquareHalfBugSlight.backward (mixed.py:" in culprit.message
        assert culprit.factor == pytest.approx(1.05, rel=0.01)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_a_right_function_computing_in_half_precision_passes_with_nothing_said(dtype):
    # its own rounding (and its bfloat16 scale's) is no culprit and no departure
    for seed in range(3):
        report = gradscope.check(f"{MIXED}:HalfRightHead", shape={"x": (3, 8)},
                                 autocast=dtype, seed=seed)
        assert report.passed, report.to_text()
        assert not [d for d in report.diagnostics
                    if d.kind in ("culprit", "inner_departure")], report.to_text()
