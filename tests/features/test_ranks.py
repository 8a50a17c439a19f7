"""A replicated tensor's gradient that differs between ranks is a failing finding naming the
tensor and the rank — with the partial sums of a missing all-reduce recognised, and a
rank-dependent factor named; and no such finding where the ranks agree."""

from __future__ import annotations

import pytest

from tests.targets.distributed.checked import checked


@pytest.mark.slow
def test_a_missing_all_reduce_is_each_rank_holding_its_part():
    report = checked("MLPForgetsAllReduce")
    assert not report.passed
    found = [d for d in report.diagnostics if d.kind == "ranks_disagree"]
    assert found and found[0].inputs == ["x"] and found[0].where == "rank 1"
    assert "add up to the derivative" in found[0].message
    assert "all-reduce" in found[0].hint


@pytest.mark.slow
def test_a_rank_dependent_factor_is_named_and_fails_though_rank_0_agrees():
    report = checked("rank_scaled")
    assert not report.passed
    assert report.inputs[0].status == "ok"  # rank 0's gradient is right: the finding fails it
    (found,) = [d for d in report.diagnostics if d.kind == "ranks_disagree"]
    assert "rank 1's is 2 × rank 0's" in found.message
    assert "add up" not in found.message
