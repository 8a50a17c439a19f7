"""A hand-written backward's own named checks: failing ones fail the run (evidence about the
target), and where backward is not linear nothing is excused as a surrogate."""

from __future__ import annotations

import torch

import gradscope
from gradscope.evidence import custom_backward
from gradscope.evidence.gather import gather
from gradscope.evidence.prepare import prepare
from gradscope.options import Options, Request
from gradscope.runner.excuses import excuse
from tests.paths import DATA


def _facts(command: str, target: str, **options):
    prepared = prepare(Request(command, target, Options(**options)))
    return excuse(prepared, gather(prepared)).facts.get("backward checks")


def test_a_nonlinear_backward_is_found_and_fails_the_run():
    prepared = prepare(Request("check", f"{DATA}/backwards.py:BlindSquare",
                               Options(at={"x": "1,2"})))
    evidence = gather(prepared)
    found = excuse(prepared, evidence).facts.get("backward checks")
    assert [d.kind for d in found.findings] == ["nonlinear_backward"]
    # v and w are the random upstreams' (compared already): |αv + βw| ≠ α|v| + β|w| is
    # exactly where the mix departs
    v, w = (view.upstream for view in evidence.views[1:3])
    a, b = custom_backward.ALPHA, custom_backward.BETA
    departs = ((a * v + b * w).abs() - (a * v.abs() + b * w.abs())).abs() > 1e-6
    assert torch.equal(found.nonlinear["x"], departs) and bool(departs.any())
    report = gradscope.check(f"{DATA}/backwards.py:BlindSquare", x="1,2")
    assert not report.passed and any(f.kind == "nonlinear_backward" for f in report.failures)


def test_a_nonlinear_backward_is_never_excused_even_where_the_forward_is_flat():
    report = gradscope.check(f"{DATA}/backwards.py:BlindSquare", x="1,2", surrogate="x")
    assert not report.passed and any(f.kind == "nonlinear_backward" for f in report.failures)


def test_an_expression_has_no_hand_written_backward_to_check():
    assert _facts("check", "sin(x)", at={"x": "1,2"}) is None


def test_a_backward_linear_only_to_its_own_precision_warns_where_the_evidence_agrees():
    # an iterative solver's backward: right to 5e-7, its error depending on the upstream; the
    # linearity probe sees that, but its own upstream's answer agrees with finite differences
    report = gradscope.check(f"{DATA}/backwards.py:SolvedSquare", x="randn(200)")
    assert report.passed, report.to_text()
    assert any(d.kind == "nonlinear_backward" for d in report.diagnostics)
    assert not any(f.kind == "nonlinear_backward" for f in report.failures)
    assert any("agree with the references: a warning" in n for n in report.notes)
    # the same solver around a wrong backward: the evidence disagrees, and the probe fails too
    wrong = gradscope.check(f"{DATA}/backwards.py:SolvedScaledSquare", x="randn(200)")
    assert not wrong.passed
    assert {"mismatch", "nonlinear_backward"} <= {f.kind for f in wrong.failures}
