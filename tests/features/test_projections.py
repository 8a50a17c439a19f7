"""Random projections over every element of a sampled input: an element the sample missed
still shows, and a direction the target rejects is `not run`, never a pass of nothing."""

from __future__ import annotations

import gradscope
from gradscope.report.status import Status
from tests.paths import DATA


def _projections(report):
    return [c for c in report.upstream_checks if c.label.startswith("random projection")]


def test_projections_cover_the_elements_the_sample_missed():
    # 8 of 400 elements sampled: three projections over all 400 judge the rest
    report = gradscope.check("sum(x**2) + 1e-3 * x[123]", shape={"x": "400"}, max_fd=10,
                             sample=8)
    assert report.passed
    assert len(_projections(report)) == 3
    assert all(c.result == Status.OK for c in _projections(report))


def test_a_direction_the_target_rejects_is_not_run_and_says_why():
    values = ",".join(["0.5"] * 39 + ["1.0"])  # an element at the edge: every direction
    report = gradscope.check(f"{DATA}/rejecting.py:probability", p=values, max_fd=10,
                             sample=8, seed=1)
    rows = _projections(report)
    assert rows and all(c.result == Status.NOT_RUN for c in rows
                        if "rejected its points" in c.label)
    assert any("probability pushed past 1" in c.label for c in rows)
