"""Vanishing ops: inputs below one confirmed by probing, ok zeros relabelled `vanishing` only
below a known piecewise-constant op, never a mismatch relabelled.

A zero gradient below a vanishing op is an artefact only when the function still moves."""

from __future__ import annotations

import torch

import gradscope
from gradscope.evidence.gather import gather
from gradscope.evidence.prepare import prepare
from gradscope.features.vanishing import confirm
from gradscope.options import Options, Request
from gradscope.runner.excuses import excuse
from tests.paths import DATA


def _facts(target: str, **options):
    prepared = prepare(Request("jvp", target, Options(**options)))
    return excuse(prepared, gather(prepared)).facts.get("vanishing")


def test_inputs_below_a_vanishing_op():
    found = _facts("sum(round(x) * w)", at={"x": "0.2,1.7", "w": "1,2"})
    assert found.vanishing == {"x"} and found.confirmed == {"x"}
    report = gradscope.jvp("sum(round(x) * w)", x="0.2,1.7", w="1,2")
    assert report.passed and [i.status for i in report.inputs] == ["vanishing", "ok"]


def test_a_straight_through_estimator_is_no_vanishing_op():
    found = _facts(f"{DATA}/corpus.py:RoundSTE", at={"x": "0.2,1.7"})
    assert found is None or "x" not in found.vanishing


def test_a_wrong_gradient_below_a_vanishing_op_stays_a_mismatch():
    # round's zero times a factor the backward gets wrong: only ok zeros are relabelled
    report = gradscope.jvp(f"{DATA}/corpus.py:SignFlip", x="0.2,1.7")
    assert not report.passed and report.inputs[0].status == "mismatch"


def test_a_function_that_moves_is_confirmed_a_constant_one_is_not():
    values = {"x": torch.tensor([0.2, 1.4], dtype=torch.float64)}
    ones = torch.ones(2, dtype=torch.float64)
    assert confirm(lambda v: torch.round(v["x"]), values, {"x"}, ones).names == {"x"}
    assert confirm(lambda v: 0 * v["x"], values, {"x"}, ones).names == set()
    # softmax sums to one: constant for a ones upstream, not for another
    softmax = lambda v: torch.softmax(v["x"], 0)  # noqa: E731
    assert confirm(softmax, values, {"x"}, ones).names == set()
    assert confirm(softmax, values, {"x"}, torch.tensor([1.0, -1.0],
                                                         dtype=torch.float64)).names == {"x"}


def test_a_shift_the_target_refuses_is_skipped_and_said():
    values = {"x": torch.tensor([0.2, 1.4], dtype=torch.float64)}
    ones = torch.ones(2, dtype=torch.float64)

    def bounded(v, bound):  # a domain of [0.15, bound]
        if bool((v["x"] > bound).any() or (v["x"] < 0.15).any()):
            raise ValueError("underflow in dt")
        return torch.round(v["x"])

    # the wide shifts (0.37·max(1, |x|)) leave [0.15, 1.6] both ways, the shorter ones stay
    found = confirm(lambda v: bounded(v, 1.6), values, {"x"}, ones)
    assert found.names == {"x"} and found.refused == {}
    # every shift refused: nothing confirmed, the refusal said in the user's words
    found = confirm(lambda v: bounded(v, 1.41), values, {"x"}, ones)
    assert found.names == set() and found.refused == {"x": "ValueError: underflow in dt"}
