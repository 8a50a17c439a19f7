"""One status vocabulary and one order of severity for every ranking."""

from gradscope.report.status import (
    MISMATCH,
    RANK,
    RANK_OF_CODE,
    SEVERITY,
    STATUS_NAMES,
    UNCHECKED,
    worst,
)


def test_one_order_worst_first_and_unchecked_below_ok():
    assert SEVERITY[0] == MISMATCH and SEVERITY[-1] == UNCHECKED
    assert set(SEVERITY) == set(STATUS_NAMES)
    assert RANK["mismatch"] > RANK["undefined"] > RANK["nondifferentiable"] > RANK["ok"]
    assert RANK["ok"] > RANK["unchecked"]
    assert all(RANK[STATUS_NAMES[c]] == r for c, r in RANK_OF_CODE.items())


def test_worst_of_names():
    assert worst(["ok", "vanishing", "surrogate"]) == "vanishing"
    assert worst([]) == "ok" and worst(["unchecked", "ok"]) == "ok"
