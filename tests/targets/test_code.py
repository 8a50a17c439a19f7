"""Python targets: loading, naming inputs, calling, and keeping the user's errors theirs."""

from __future__ import annotations

import math
import textwrap

import pytest

import gradscope
from gradscope.errors import TargetError, UsageError
from tests.paths import DATA, SEEDS


def test_forward_raising_is_exit_3(tmp_path):
    path = tmp_path / "fwd.py"
    path.write_text("def f(x):\n    return x.nonexistent_method()\n")
    with pytest.raises(TargetError, match="AttributeError"):
        gradscope.check(f"{path}:f")


def test_tuple_output_is_refused(tmp_path):
    path = tmp_path / "tup.py"
    path.write_text("def f(x):\n    return x, x\n")
    with pytest.raises(UsageError, match="pick the output to check with --output-index"):
        gradscope.check(f"{path}:f")


def test_float64_failure_falls_back_to_run_dtype(tmp_path):
    path = tmp_path / "f32.py"
    path.write_text(textwrap.dedent("""
        import torch
        def f(x):
            if x.dtype != torch.float32:
                raise TypeError("float32 only")
            return torch.sin(x) * 2
    """))
    report = gradscope.check(f"{path}:f", dtype="float32")
    assert report.passed, report.to_text()
    assert any("ran in float32" in n for n in report.notes)


def test_target_failing_at_a_perturbed_point_leaves_that_element_unchecked(tmp_path):
    path = tmp_path / "edge.py"
    path.write_text("import torch\n\ndef f(x):\n"
                    "    if bool((x > 1).any()):\n"
                    "        raise ValueError('x must be <= 1')\n"
                    "    return x * 2\n")
    report = gradscope.check(f"{path}:f", x="1,0.5")
    (x,) = report.inputs
    assert math.isnan(x.finite_difference[0]) and x.finite_difference[1] == pytest.approx(2)
    assert x.status_counts == {"ok": 1, "unchecked": 1} and report.passed
    assert any("rejected the perturbed points of 1 element(s) of x (flat index 0)" in n
               for n in report.notes)
    report = gradscope.check(f"{path}:f", x="1,1")  # every element at the edge
    (x,) = report.inputs
    assert x.finite_difference is None and "perturbed point" in x.finite_difference_skipped
    assert x.status == "inconclusive" and x.status_counts == {"unchecked": 2}
    assert not report.passed  # nothing was compared: never a pass


def test_missing_arg_gets_a_hint():
    with pytest.raises(TargetError) as info:
        gradscope.check(f"{SEEDS}:KillHead", input="randn(3,8)")
    assert "give non-tensor parameters with --arg" in str(info.value)
    assert "gradscope passed tensors for n;" in str(info.value)  # (input was given)


def test_an_unannotated_input_given_by_shape_is_not_called_a_guess():
    quantise = f"{DATA}/functions.py:quantise"  # quantise(x, w): w unannotated
    guessed = gradscope.check(quantise, shape={"x": "25"}).notes  # w: the default (25,)
    assert any("`w` has no annotation and was not given" in n for n in guessed)
    shaped = gradscope.check(quantise, shape={"x": "4", "w": "4"}).notes
    assert not any("has no annotation" in n for n in shaped)
