"""The compare-single feature's words and its refusal without --nproc (its runs with ranks are
in tests/targets/distributed/test_single.py)."""

from __future__ import annotations

import pytest

import gradscope
from gradscope.errors import UsageError
from gradscope.features.single import _diagnostic
from gradscope.report.status import FAILING_KINDS


def test_a_difference_is_a_failing_finding_naming_what_and_the_factor():
    found = _diagnostic("w1", 0.5, 1.0, 0.5)
    assert found.kind == "single_differs" in FAILING_KINDS
    assert found.inputs == ["w1"] and "w1's gradient" in found.message
    assert "0.5 × one process's" in found.message
    assert _diagnostic("output", 1.0, 2.0, None).inputs == []


def test_without_nproc_it_is_refused():
    with pytest.raises(UsageError, match="give --nproc N too"):
        gradscope.check("x*2", compare_single=True)
