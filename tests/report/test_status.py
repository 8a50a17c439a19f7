"""One status vocabulary: each status knows its word, code, rank, whether it fails, is quiet
or was compared, and its colour; one order of severity for every ranking."""

import json

from gradscope.report.status import ELEMENT, SEVERITY, Status, worst


def test_one_order_worst_first_and_unchecked_below_ok():
    assert SEVERITY[0] == Status.MISMATCH and SEVERITY[-1] == Status.UNCHECKED
    assert set(SEVERITY) == set(ELEMENT)
    assert Status.MISMATCH.rank > Status.INCONCLUSIVE.rank > Status.UNDEFINED.rank
    assert Status.UNDEFINED.rank > Status.NONDIFFERENTIABLE.rank > Status.OK.rank
    assert Status.OK.rank > Status.UNCHECKED.rank > Status.NOT_RUN.rank


def test_a_status_is_its_word_everywhere():
    assert Status.MISMATCH == "mismatch" and f"{Status.OK}" == "ok" and str(Status.OK) == "ok"
    assert {"mismatch": 1}[Status.MISMATCH] == 1
    assert json.dumps([Status.NOT_RUN]) == '["not run"]'
    assert all(Status.of_code(s.code) is s for s in ELEMENT)


def test_what_each_status_means():
    assert {s for s in Status if s.fails} == {Status.MISMATCH, Status.INCONCLUSIVE,
                                              Status.FAILED}
    assert {s for s in Status if s.compared} == {Status.OK, Status.MISMATCH, Status.SURROGATE,
                                                 Status.VANISHING}
    assert not Status.MISMATCH.quiet and not Status.UNDEFINED.quiet and Status.SURROGATE.quiet
    assert Status.UNDEFINED.style == "magenta" and all(s.style for s in Status)


def test_worst_of_names():
    assert worst(["ok", "vanishing", "surrogate"]) == "vanishing"
    assert worst([]) == "ok" and worst(["unchecked", "ok"]) == "ok"
