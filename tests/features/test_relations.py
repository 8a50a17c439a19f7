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


def test_a_located_rule_is_said_only_where_the_other_upstreams_find_it_too():
    # a row-normalising backward with its projection term halved is wrong in every row; an
    # upstream of ones leaves one row agreeing, and "index 1, 2 of dim 0 only" was that
    # upstream's artefact: the seeded random upstreams find other rows, so counts are said
    halved = gradscope.check(f"{DATA}/culprits.py:RowNormBug", shape={"x": (3, 4)})
    assert not halved.passed
    text = halved.to_text()
    assert "lies in index" not in text and "element(s) disagree" in text
    # wrong in its first row alone, whatever the upstream: the rule holds and is said
    first = gradscope.check(f"{DATA}/culprits.py:FirstRowBug", shape={"x": (3, 4)})
    assert not first.passed
    assert "the disagreement lies in index 0 of dim 0 only" in first.to_text()


def test_a_located_rule_no_other_upstream_tested_is_not_said():
    # jvp asks one upstream: the first row's place was fitted to it and never tested, so the
    # report gives counts; check tests it on its seeded random upstreams and says it
    asked = gradscope.jvp(f"{DATA}/culprits.py:FirstRowBug", shape={"x": (3, 4)})
    assert not asked.passed
    assert not [d for d in asked.diagnostics if d.kind == "mismatch_pattern"]
    assert "lies in index" not in asked.to_text()
    # a scalar output has one gradient whatever the upstream: its place stays said
    scalar = gradscope.jvp(f"{DATA}/culprits.py:rows_weighted_first_bug", shape={"x": (3, 4)})
    assert "the disagreement lies in index 0 of dim 0 only" in scalar.to_text()
