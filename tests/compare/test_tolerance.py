"""Tolerances follow the dtype; explicit ones win; help texts quote the same numbers."""

import pytest
import torch

from gradscope.compare.tolerance import DEFAULT_TOLERANCES, Tolerance, tolerance_help


def test_tolerances_follow_the_dtype_and_explicit_values_win():
    assert Tolerance.for_dtype("float64") == Tolerance(1e-6, 1e-9)
    assert Tolerance.for_dtype("bfloat16").rtol == 0.1
    assert Tolerance.for_dtype("float32", atol=0.5) == Tolerance(5e-4, 0.5)
    loose = [DEFAULT_TOLERANCES[d][0] for d in ("float64", "float32", "float16", "bfloat16")]
    assert loose == sorted(loose)  # fewer bits, looser


def test_help_quotes_the_numbers_in_use():
    assert tolerance_help(0) == "float64 1e-06, float32 0.0005, float16 0.02, bfloat16 0.1"
    assert tolerance_help(1).startswith("float64 1e-09")


def test_half_precision_atol_follows_the_tensor_scale():
    assert Tolerance.for_dtype("float16").scaled and Tolerance.for_dtype("bfloat16").scaled
    assert not Tolerance.for_dtype("float32").scaled
    assert not Tolerance.for_dtype("float16", atol=1e-3).scaled  # the user's atol is theirs


def test_atol_for_a_tensor_scales_by_its_largest_finite_value_in_half_precision():
    big = torch.tensor([0.5, -8.0, float("inf"), float("nan")])
    assert Tolerance.for_dtype("float16").atol_for(big) == pytest.approx(2e-3 * 8)
    assert Tolerance.for_dtype("float16").atol_for(torch.tensor([0.1])) == 2e-3  # at least 1×
    assert Tolerance.for_dtype("float32").atol_for(big) == 1e-5
    assert Tolerance.for_dtype("float16").atol_for(torch.zeros(0)) == 2e-3
