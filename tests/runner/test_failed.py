"""A backward that could not run, in each stage: every input a mismatch with the failure's
reason, that failure over every input as the one diagnostic, and each input's row showing the
references' answers — asked in the evidence stage — beside autograd's failure."""

from __future__ import annotations

import pytest

from gradscope.evidence.gather import gather
from gradscope.options import Options, Request
from gradscope.report.status import Status
from gradscope.runner import failed, prepare
from tests.paths import BUGGY, DATA, SEEDS


def _failed(target: str, **options):
    prepared = prepare(Request("check", target, Options(**options)))
    return prepared, gather(prepared)


def test_every_input_is_a_mismatch_and_the_backwards_failure_is_one_of_the_failures():
    prepared, evidence = _failed(f"{BUGGY}:AbsProdOneGradient")
    statuses, failures = failed.verdict(prepared, evidence)
    assert statuses == dict.fromkeys(prepared.target.names, Status.MISMATCH)
    assert failures[0].kind == "backward_arity"
    assert {f.subject for f in failures[1:]} == set(prepared.target.names)
    assert all(f.detail.startswith("backward failed: ") for f in failures[1:])


def test_the_one_diagnostic_covers_every_input_and_element():
    prepared, evidence = _failed(f"{DATA}/backwards.py:WrongShape", at={"x": "randn(2,3)"})
    found = failed.diagnostic(prepared, evidence)
    assert found.kind == "backward_shape" and found.inputs == ["x"] and found.count == 6


def test_each_row_shows_the_references_answers_asked_in_the_evidence_stage():
    prepared, evidence = _failed(f"{BUGGY}:AbsProdOneGradient")
    assert set(evidence.unanswered) == {r.name for r in evidence.references if r.ran}
    rows = failed.inputs(prepared, evidence)
    assert [r.name for r in rows] == list(prepared.target.names)
    for row in rows:
        assert row.columns["autograd"].failed and row.columns["autograd"].values is None
        assert row.columns["finite_difference"].values is not None


def test_a_backward_that_runs_asks_nothing_of_the_references_here():
    _, evidence = _failed(f"{SEEDS}:AbsProd")
    assert evidence.backward.grads is not None and evidence.unanswered == {}
    with pytest.raises(AssertionError):
        failed.diagnostic(*_failed(f"{SEEDS}:AbsProd"))
