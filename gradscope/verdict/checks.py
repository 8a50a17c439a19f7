"""A named check behind a verdict beyond the per-element tables (a random upstream vector, the
full Jacobian): its comparisons summed up as an `UpstreamCheck` that names itself, passing when
no element mismatches. A new check is a view the evidence stage lays out (or a function that
returns an UpstreamCheck) and its line in the verdict stage."""

from __future__ import annotations

from collections.abc import Mapping

from gradscope.report.model import UpstreamCheck
from gradscope.report.status import Status, worst
from gradscope.verdict.compare import Comparison


def named(label: str, cmps: Mapping[str, Comparison]) -> UpstreamCheck:
    """The check `label` over its inputs' comparisons."""
    mismatches = sum(c.counts().get(Status.MISMATCH, 0) for c in cmps.values())
    largest = max((c.max_abs_error() for c in cmps.values()), default=0.0)
    statuses = {n: c.worst() if c.compared() else Status.NOT_RUN for n, c in cmps.items()}
    ran = [s for s in statuses.values() if s != Status.NOT_RUN]
    result = worst(ran) if ran else Status.NOT_RUN
    return UpstreamCheck(label, mismatches == 0, largest, mismatches, statuses, result)
