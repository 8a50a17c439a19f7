"""How a mismatch relates to the derivative: said for undeclared inputs, and read by the
culprits and surrogates that name it."""

from __future__ import annotations

import gradscope
from tests.paths import DATA

CORPUS = f"{DATA}/corpus.py"


def test_a_sign_error_is_said_as_one():
    report = gradscope.check(f"{CORPUS}:SignFlip", x="0.2,1.7,-0.4")
    (found,) = [d for d in report.diagnostics if d.kind == "mismatch_pattern"]
    assert found.inputs == ["x"] and "−1 × the derivative" in found.message


def test_a_declared_input_gets_its_relation_in_the_surrogate_diagnostic_not_a_pattern():
    report = gradscope.check(f"{CORPUS}:SignFlip", x="0.2,1.7,-0.4", surrogate="x")
    assert report.passed
    assert not [d for d in report.diagnostics if d.kind == "mismatch_pattern"]
    (said,) = [d for d in report.diagnostics if d.kind == "surrogate_gradient"]
    assert "−1 × the derivative" in said.message
