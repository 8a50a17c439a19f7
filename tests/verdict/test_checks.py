"""Named checks: each names itself, passes on a right gradient and fails on a wrong one."""

from __future__ import annotations

import gradscope
from gradscope.rng import seed_for
from tests.paths import DATA


def test_check_names_its_extra_verdicts():
    report = gradscope.check("sin(x) * y", x="0.1,0.2", y="1,2")
    labels = [c.label for c in report.upstream_checks]
    assert labels == [f"random upstream #1 (uniform(-1,1), seed {seed_for(0, ':upstream0')})",
                      f"random upstream #2 (uniform(-1,1), seed {seed_for(0, ':upstream1')})",
                      "full Jacobian"]
    assert all(c.passed for c in report.upstream_checks)
    assert len(set(labels)) == len(labels)  # each names the upstream it used


def test_a_random_upstream_catches_a_backward_a_ones_upstream_hides():
    report = gradscope.check(f"{DATA}/backwards.py:BlindSquare", x="linspace(1,2,5)")
    assert report.inputs[0].status == "ok"  # ones upstream: right
    assert not report.upstream_checks[0].passed and not report.passed


def test_projections_cover_the_elements_a_sample_missed():
    report = gradscope.check(f"{DATA}/backwards.py:WrongAtLast", x="randn(200)", max_fd=50,
                             sample=5)
    projections = [c for c in report.upstream_checks if c.label.startswith("random projection")]
    assert len(projections) == 3 and projections[0].label.endswith("(all 200 elements)")
    assert not all(c.passed for c in projections)
