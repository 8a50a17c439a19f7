"""The bug path with default inputs (no --at): a backward wrong on one branch only fails, its
correct twin passes; each case has a negative (what must not be excused or reported)."""

from __future__ import annotations

import pytest

import gradscope
from tests.paths import DATA

BRANCHES = f"{DATA}/branches.py"


@pytest.mark.parametrize("name", ["LeakySwishBug", "SoftClip", "WideCube", "SincBug"])
def test_a_backward_wrong_on_one_branch_fails_with_default_inputs(name):
    report = gradscope.check(f"{BRANCHES}:{name}")
    assert not report.passed and report.failures


@pytest.mark.parametrize("name", ["LeakySwish", "Sinc"])
def test_its_correct_twin_passes_with_default_inputs(name):
    report = gradscope.check(f"{BRANCHES}:{name}")
    assert report.passed, report.failures


def test_the_kink_of_user_code_is_found_from_its_values_not_reported_as_a_bug():
    # LeakySwish's slope jumps at the exact zero among the default inputs: no branch id tells
    # (user code), the stencil's second differences do
    (x,) = gradscope.check(f"{BRANCHES}:LeakySwish").inputs
    assert x.status_counts == {"ok": 24, "nondifferentiable": 1}
    (buggy,) = gradscope.check(f"{BRANCHES}:LeakySwishBug").inputs
    assert buggy.status_counts["mismatch"] == 12  # every x < 0: not excused as kinks
