"""The drop-in's counts: what torch decided is counted apart, and a worker's counts add up."""

from __future__ import annotations

from gradscope.testing.stats import DropInStats


def test_calls_count_what_torch_decided_and_workers_add_up():
    stats = DropInStats(passed=1, failed=1)
    stats.add({"passed": 2, "delegated": 1, "reasons": {"sparse input": 1}})
    stats.add({"failed": 1, "delegated": 2, "reasons": {"sparse input": 2, "NaN input": 1}})
    assert (stats.passed, stats.failed, stats.delegated, stats.calls) == (3, 2, 3, 8)
    assert stats.reasons == {"sparse input": 3, "NaN input": 1}
