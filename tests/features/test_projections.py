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


def test_autograd_is_allowed_its_tolerance_along_the_direction_not_in_the_worst_case():
    # over n elements the worst case rtol·Σ|gᵢtᵢ| is about √n times 6·rtol·|g|: the smaller
    # is allowed, so an error of 1 % of |g| is seen over 10⁶ elements, where the worst case
    # would hide any error below about 40 %
    import math

    import torch

    from gradscope.engines.fd.result import Directional
    from gradscope.features.projections import Projection, judged

    zero = torch.zeros(())
    g = torch.randn(10**6, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    t = torch.randn(10**6, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    norm, spread = float(g.norm()), float((g * t).abs().sum())
    e = 0.01 * norm * t / float(t.norm())  # an error of 1 % of |g|, along t itself
    exact = float((g * t).sum())
    d = Directional(torch.tensor(exact), zero, zero.bool())
    difference, slack = judged(d, torch.ones(()), exact + float((e * t).sum()), spread, norm,
                               0.0, 5e-4)
    assert math.isclose(slack, 6 * 5e-4 * norm) and difference > slack
    assert Projection(("w",), 0, difference, slack, norm).miss(1e-2) < 0.5
    # few elements: the worst case is the smaller bound, and stays
    _, small = judged(d, torch.ones(()), exact, 3.0, 10.0, 0.0, 1e-3)
    assert math.isclose(small, 3e-3)


def test_the_tolerance_along_the_direction_is_taken_in_float64_only():
    # below float64 the differences' own error estimate falls short of a 6σ bound: a correct
    # 10⁹-parameter model checked in float32 failed one; the worst case stays there
    from types import SimpleNamespace

    import torch

    from gradscope.features.projections import statistical

    def fd(dtype):
        return SimpleNamespace(point=SimpleNamespace(machine_eps=torch.finfo(dtype).eps))

    assert statistical(fd(torch.float64)) and not statistical(fd(torch.float32))
