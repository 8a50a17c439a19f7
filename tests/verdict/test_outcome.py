"""The one place that decides pass or fail, --fail-on included."""

from __future__ import annotations

import pytest

from gradscope.report.model import Diagnostic, InputReport, Report, TensorSummary, UpstreamCheck
from gradscope.verdict.outcome import fails, passed


def _report(status: str = "ok", fail_on: str = "mismatch", diagnostics=(), checks=()):
    item = InputReport("x", "input", [1], [1.0], [1.0], None, [1.0], None, 0.0, status)
    return Report("check", "x", "expression", "float64", True, TensorSummary([1], [1.0]),
                  TensorSummary([1], [1.0]), [item], list(diagnostics), fail_on=fail_on,
                  upstream_checks=list(checks))


def _diag(kind: str) -> Diagnostic:
    return Diagnostic(kind, "op", "where", ["x"], 1, "message", "hint")


@pytest.mark.parametrize("report, ok", [
    (_report(), True),
    (_report("mismatch"), False),
    (_report("nondifferentiable"), True),
    (_report("nondifferentiable", "warning"), False),
    (_report(diagnostics=[_diag("vanishing_gradient")]), True),
    (_report(diagnostics=[_diag("vanishing_gradient")], fail_on="warning"), False),
    (_report(diagnostics=[_diag("nonlinear_backward")]), False),  # whatever --fail-on says
    (_report(checks=[UpstreamCheck("random upstream #1", False, 1.0, 1, {})]), False),
])
def test_passed(report, ok):
    assert passed(report) is ok


def test_never_turns_a_failed_report_into_exit_zero_but_keeps_it_failed():
    report = _report("mismatch", "never")
    report.passed = passed(report)
    assert report.passed is False and fails(report) is False
    report.fail_on = "mismatch"
    assert fails(report) is True
