"""The verdict of a report and what it means for the exit code, `--fail-on` included: the one
place that decides pass or fail."""

from __future__ import annotations

from gradscope.report.model import Report
from gradscope.report.status import FAILING_KINDS


def passed(report: Report) -> bool:
    """Whether every check passed, per the report's `fail_on` (mismatch or warning)."""
    # a mismatch, or an input that nothing was compared for (a hollow pass is a failure)
    failed = any(i.status in ("mismatch", "inconclusive") for i in report.inputs)
    failed |= any(d.kind in FAILING_KINDS for d in report.diagnostics)
    failed |= any(not c.passed for c in report.upstream_checks)
    failed |= report.forward is not None and report.forward.status == "mismatch"
    failed |= bool(report.nonfinite) and not report.allow_nan
    if report.fail_on == "warning":
        failed |= bool(report.diagnostics)
        failed |= any(i.status != "ok" for i in report.inputs)
        failed |= report.forward is not None and report.forward.status != "ok"
    return not failed


def fails(report: Report) -> bool:
    """Whether the report fails its run (exit 1): it did not pass and `--fail-on` is not
    `never`."""
    return not report.passed and report.fail_on != "never"
