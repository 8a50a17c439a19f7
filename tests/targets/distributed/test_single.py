"""--compare-single: the ranks beside the same target in one process. A forward that is wrong
consistently with its backward (a mean where the sum belongs, both ways) passes the gradient
check and fails here; shards joined by what the code says (partition_dim, DTensor placements)
are compared; a target built differently at world size 1 is not compared at all."""

from __future__ import annotations

import pytest

import gradscope
from tests.targets.distributed.checked import PAR, children


def _single(name: str):
    report = gradscope.check(f"{PAR}:{name}", nproc=2, compare_single=True)
    assert not children()
    return report


@pytest.mark.slow
def test_a_forward_averaged_consistently_with_its_backward_differs_from_one_process():
    assert gradscope.check(f"{PAR}:SplitMLPAveraged", nproc=2).passed  # the gradients agree
    report = _single("SplitMLPAveraged")
    assert not report.passed
    found = [d for d in report.diagnostics if d.kind == "single_differs"]
    assert found[0].inputs == [] and "0.5 × one process's" in found[0].message


@pytest.mark.slow
def test_shards_joined_by_partition_dim_are_the_same_in_one_process():
    report = _single("SplitMLP")
    assert report.passed, report.to_text()
    assert any("the same at world size 1: output, x, w1, b1, w2" in n for n in report.notes)


@pytest.mark.slow
def test_shards_seeded_per_rank_are_never_compared():
    report = _single("ParallelMLP")
    assert report.passed
    assert any("nothing compared" in n for n in report.notes)
