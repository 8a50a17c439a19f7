"""The one place that decides pass or fail, --fail-on included: failures from statuses,
failing diagnostics, named checks, NaN at the given inputs and forward mode; warnings only
with --fail-on warning."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gradscope.compare.outcome import fails, failures, nonfinite_failures, warnings
from gradscope.report.model import Diagnostic, NamedCheck, Report, TensorSummary
from gradscope.report.status import Status


def _diag(kind: str) -> Diagnostic:
    return Diagnostic(kind, "op", "where", ["x"], 1, "message", "hint")


def _failures(status=Status.OK, diagnostics=(), checks=(), forward=None, nonfinite=(),
              allow_nan=False):
    return failures(statuses={"x": status}, mismatches={"x": 3}, unjudged={},
                    findings=diagnostics, checks=list(checks), forward=forward,
                    nonfinite=list(nonfinite), allow_nan=allow_nan)


@pytest.mark.parametrize("kwargs, kinds", [
    ({}, []),
    ({"status": Status.MISMATCH}, ["mismatch"]),
    ({"status": Status.INCONCLUSIVE}, ["inconclusive"]),
    ({"status": Status.NONDIFFERENTIABLE}, []),
    ({"diagnostics": [_diag("vanishing_gradient")]}, []),
    ({"diagnostics": [_diag("nonlinear_backward")]}, ["nonlinear_backward"]),
    ({"checks": [NamedCheck("random upstream #1", Status.MISMATCH, 1.0, 1,
                            {"x": Status.MISMATCH})]}, ["check"]),
    ({"forward": Status.MISMATCH}, ["forward"]),
    ({"forward": Status.NONDIFFERENTIABLE}, []),
    ({"nonfinite": ["output"]}, ["nonfinite"]),
    ({"nonfinite": ["output"], "allow_nan": True}, []),
])
def test_failures(kwargs, kinds):
    assert [f.kind for f in _failures(**kwargs)] == kinds


def test_an_input_nothing_compared_says_why():
    (found,) = failures(statuses={"x": Status.INCONCLUSIVE}, mismatches={},
                        unjudged={"x": "the target failed at a perturbed point"}, findings=(),
                        checks=[], forward=None, nonfinite=[], allow_nan=False)
    assert found.detail == "the target failed at a perturbed point"


def test_warnings_name_every_diagnostic_kind_and_status():
    assert warnings([], [Status.OK], Status.OK) == []
    (found,) = warnings([_diag("saturation"), _diag("saturation")],
                        [Status.OK, Status.NONDIFFERENTIABLE], None)
    assert found.kind == "warning" and found.detail == "saturation, nondifferentiable"
    assert nonfinite_failures(["x"], False)[0].subject == "x"


def test_never_turns_a_failed_report_into_exit_zero_but_keeps_it_failed():
    summary = TensorSummary([1], [1.0])
    report = Report("check", "x", "expression", "float64", False, summary, summary, [], [],
                    fail_on="never")
    assert report.passed is False and fails(report) is False
    assert fails(replace(report, fail_on="mismatch")) is True
