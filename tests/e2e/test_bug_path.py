"""The bug path with default inputs (no --at): a backward wrong on one branch only fails, its
correct twin passes; each case has a negative (what must not be excused or reported)."""

from __future__ import annotations

import pytest

import gradscope
from gradscope.report.headline import headline
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


@pytest.mark.parametrize("name, words", [
    ("RoundSTETwice", "a straight-through gradient of 2 integrates to 1.96× the forward's rise"),
    ("SignSTEWideWindow", "gated to [−3, 3] integrates to 3.01×"),
    ("SpikeFlipped", "a surrogate gradient against the forward: it cancels itself out"),
    ("spikes_counted_flipped", "against the forward"),
    ("rounded_running_total_twice", "integrates to 1.96×"),
])
def test_a_surrogate_inconsistent_with_its_forward_fails_and_says_how(name, words):
    report = gradscope.check(f"{BRANCHES}:{name}")
    assert not report.passed and words in headline(report), report.to_text()
    (pattern,) = [d for d in report.diagnostics if d.kind == "mismatch_pattern"]
    assert pattern.relation == "surrogate"


@pytest.mark.parametrize("name, words", [
    ("RoundSTE", "identity: straight-through"), ("detach_round", "identity: straight-through"),
    ("SignSTE", "gated to [−1, 1]"), ("Spike", "smooth bump"), ("SpikeAtan", "0.984×"),
    ("spikes_counted", "coarse scale"), ("rounded_running_total", "coarse scale"),
])
def test_a_consistent_surrogate_passes_named_with_its_coarse_scale_ratio(name, words):
    report = gradscope.check(f"{BRANCHES}:{name}")
    assert report.passed, report.to_text()
    (said,) = [d.message for d in report.diagnostics if d.kind == "surrogate_gradient"]
    assert words in said and "coarse scale: over [−12.7, 12.7] it integrates to" in said


def test_a_declared_surrogate_is_excused_with_its_ratio_reported():
    report = gradscope.check(f"{BRANCHES}:RoundSTETwice", surrogate=True)
    assert report.passed
    assert not [d for d in report.diagnostics if d.kind == "mismatch_pattern"]


def test_a_declared_intended_form_passes_only_where_the_backward_matches_it():
    (check,) = [c for c in gradscope.check(f"{BRANCHES}:SignSTEDeclared").upstream_checks
                if "intended" in c.label]
    assert check.passed
    wide = gradscope.check(f"{BRANCHES}:SignSTEWideDeclared")
    assert not wide.passed and "against its intended surrogate" in headline(wide)
    # the same from the command line, as an expression over the inputs
    assert gradscope.check(f"{BRANCHES}:Spike", surrogate="mem=mem/(1+25*abs(mem))").passed
    assert not gradscope.check(f"{BRANCHES}:Spike", surrogate="mem=sigmoid(4*mem)").passed
