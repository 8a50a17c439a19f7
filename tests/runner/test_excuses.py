"""The excuses stage, decided before anything is judged: declarations, nonlinear backwards,
vanishing ops, flat elements and whether the forward moves there."""

from __future__ import annotations

from gradscope.options import Options, Request
from gradscope.runner.evidence import gather
from gradscope.runner.excuses import Excuses, excuse
from gradscope.runner.prepare import prepare
from tests.paths import DATA


def _excuses(command: str, target: str, **options) -> Excuses:
    prepared = prepare(Request(command, target, Options(**options)))
    return excuse(prepared, gather(prepared))


def test_declarations_come_from_the_option_the_target_and_the_graph():
    assert _excuses("jvp", "x * 2", at={"x": "1"}, surrogate=("x",)).declared == {
        "x": "declared with --surrogate"}
    marked = _excuses("jvp", f"{DATA}/corpus.py:marked_reverse", at={"x": "1,2"})
    assert list(marked.declared) == ["x"] and "MarkedGradientReversal" in marked.declared["x"]


def test_a_nonlinear_backward_is_found_and_never_excused():
    found = _excuses("check", f"{DATA}/backwards.py:BlindSquare", at={"x": "1,2"})
    assert [d.kind for d in found.findings] == ["nonlinear_backward"]
    assert bool(found.nonlinear["x"].all())


def test_a_step_is_told_from_a_forward_that_moves():
    ste = _excuses("jvp", f"{DATA}/corpus.py:RoundSTE", at={"x": "0.2,1.7"})
    assert ste.flat["x"].tolist() == [True, True] and ste.stepped["x"].tolist() == [True, True]
    assert "x" not in ste.vanishing  # its gradient is not zero: nothing vanishes
    moving = _excuses("jvp", f"{DATA}/corpus.py:SignFlip", at={"x": "0.2,1.7"})
    assert moving.flat["x"].tolist() == [False, False] and "x" not in moving.stepped


def test_inputs_below_a_vanishing_op():
    found = _excuses("jvp", "sum(round(x) * w)", at={"x": "0.2,1.7", "w": "1,2"})
    assert found.vanishing == {"x"} and found.confirmed == {"x"}
