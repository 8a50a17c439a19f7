"""The verdict stage: excuses applied to raw comparisons — kinks are never mismatches, ok
zeros below a vanishing op are `vanishing`, a gradient on a flat step is a surrogate, a
declaration excuses (but records) a mismatch — and the failures that decide the run."""

from __future__ import annotations

import dataclasses

import pytest

import gradscope
from gradscope.evidence.gather import gather
from gradscope.options import Options, Request
from gradscope.report.headline import headline
from gradscope.report.status import Status
from gradscope.runner import prepare
from gradscope.runner.excuses import excuse
from gradscope.runner.judgement import Verdict, judge
from tests.paths import DATA


def _verdict(command: str, target: str, **options) -> Verdict:
    prepared = prepare(Request(command, target, Options(**options)))
    evidence = gather(prepared)
    return judge(prepared, evidence, excuse(prepared, evidence))


def test_a_kink_in_the_stencil_is_nondifferentiable_not_a_mismatch():
    verdict = _verdict("jvp", "abs(x)", at={"x": "0,1"})
    assert verdict.table["x"].counts() == {"ok": 1, "nondifferentiable": 1}
    assert not verdict.failures


def test_ok_zeros_below_a_vanishing_op_are_vanishing():
    verdict = _verdict("jvp", "round(x) * 2", at={"x": "0.2,1.7"})
    assert verdict.table["x"].counts() == {"vanishing": 2}
    assert verdict.statuses == {"x": Status.VANISHING} and not verdict.failures


def test_a_gradient_on_a_flat_step_is_a_surrogate_whatever_made_it():
    verdict = _verdict("check", f"{DATA}/corpus.py:RoundSTE", at={"x": "0.2,1.7,-0.6"})
    assert verdict.statuses == {"x": Status.SURROGATE}
    assert set(verdict.surrogate_elements) == {"x"} and not verdict.failures


def test_a_wrong_gradient_where_the_forward_moves_is_a_mismatch_and_a_failure():
    verdict = _verdict("jvp", f"{DATA}/corpus.py:SignFlip", at={"x": "0.2,1.7"})
    assert verdict.statuses == {"x": Status.MISMATCH} and not verdict.surrogate_elements
    assert [(f.kind, f.subject) for f in verdict.failures] == [("mismatch", "x")]
    assert list(verdict.seen) == ["x"]  # kept for the relations


def test_declared_inputs_have_their_mismatches_excused_but_recorded():
    verdict = _verdict("jvp", f"{DATA}/corpus.py:SignFlip", at={"x": "0.2,1.7"},
                       surrogate=("x",))
    assert verdict.table["x"].counts() == {"surrogate": 2} and not verdict.failures
    assert verdict.seen["x"].comparison.counts() == {"mismatch": 2}


def _excuses(verdict: Verdict, name: str) -> list[tuple[str, str, int]]:
    return [(e.by, e.status.value, int(e.where.sum())) for e in verdict.table[name].excuses]


def test_each_excuse_is_recorded_with_the_feature_that_made_it():
    stepped = _verdict("check", f"{DATA}/corpus.py:RoundSTE", at={"x": "0.2,1.7,-0.6"})
    assert _excuses(stepped, "x") == [("surrogates", "surrogate", 3)]
    declared = _verdict("jvp", f"{DATA}/corpus.py:SignFlip", at={"x": "0.2,1.7"},
                        surrogate=("x",))
    assert _excuses(declared, "x") == [("surrogates", "surrogate", 2)]
    plain = _verdict("jvp", "abs(x) + round(x)", at={"x": "0,1.2"})  # (a kink, vanishing: no
    assert not plain.table["x"].excuses  # mismatch excused, nothing recorded)


def test_torchs_departure_is_recorded_as_its_own_never_as_the_users_surrogate():
    verdict = _verdict("check", f"{DATA}/padded.py:functional", shape={"w": (6, 3)},
                       const={"ids": "[0,2,3,0,5]"})
    assert _excuses(verdict, "w") == [("departures", "surrogate", 3)]
    assert not verdict.surrogate_elements and not verdict.failures


def test_a_named_check_that_fails_is_a_failure_of_its_own():
    verdict = _verdict("check", f"{DATA}/backwards.py:BlindSquare", at={"x": "linspace(1,2,5)"})
    assert verdict.statuses == {"x": Status.OK}
    # (and its backward is not linear in grad_output, a failure whatever the statuses say)
    assert {f.kind for f in verdict.failures} == {"check", "nonlinear_backward"}


def test_a_failed_backward_fails_every_input_and_says_why():
    verdict = _verdict("check", f"{DATA}/backwards.py:WrongShape", shape={"*": (2, 3)})
    assert verdict.statuses == {"x": Status.MISMATCH}
    assert [f.kind for f in verdict.failures] == ["backward_shape", "mismatch"]
    assert verdict.failures[1].detail.startswith("backward failed")


def test_the_verdict_is_frozen():
    verdict = _verdict("jvp", "x * 2", at={"x": "1,2"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        verdict.failures = ()  # type: ignore[misc]


def test_an_input_whose_every_element_is_undefined_is_inconclusive_never_a_pass():
    # (an output infinite everywhere at values gradscope drew: the upstream is 0 at every
    # output element, nothing is compared, so nothing passes)
    report = gradscope.check("x * 1e308 * 1e308")
    assert not report.passed and report.inputs[0].status == "inconclusive"
    assert "every element is undefined" in headline(report)
    assert not gradscope.check("x * 1e308 * 1e308", allow_nan=True).passed
    # an infinite padding is compared where the output is defined
    padded = gradscope.check("F.pad(x, (1,1), value=inf)")
    assert padded.passed and padded.inputs[0].status == "ok"
    assert padded.upstream_undefined == 2
