"""Surrogates, declared and behavioural: each excuse with its proof, and the cases where it
must not excuse — a forward that moves where the gradient is wrong, a surrogate inconsistent at
a coarse scale, a declaration whose intended form autograd does not follow."""

from __future__ import annotations

import gradscope
from gradscope.evidence.gather import gather
from gradscope.evidence.prepare import prepare
from gradscope.options import Options, Request
from gradscope.report.headline import headline
from gradscope.runner.excuses import excuse
from tests.paths import DATA

CORPUS = f"{DATA}/corpus.py"


def _facts(command: str, target: str, **options):
    prepared = prepare(Request(command, target, Options(**options)))
    return excuse(prepared, gather(prepared))["surrogates"]


def test_declarations_come_from_the_option_the_target_and_the_graph():
    assert _facts("jvp", "x * 2", at={"x": "1"}, surrogate=("x",)).declared == {
        "x": "declared with --surrogate"}
    marked = _facts("jvp", f"{CORPUS}:marked_reverse", at={"x": "1,2"})
    assert list(marked.declared) == ["x"] and "MarkedGradientReversal" in marked.declared["x"]


def test_a_step_is_told_from_a_forward_that_moves():
    ste = _facts("jvp", f"{CORPUS}:RoundSTE", at={"x": "0.2,1.7"})
    assert ste.flat["x"].tolist() == [True, True] and ste.stepped["x"].tolist() == [True, True]
    moving = _facts("jvp", f"{CORPUS}:SignFlip", at={"x": "0.2,1.7"})
    assert moving.flat["x"].tolist() == [False, False] and "x" not in moving.stepped


def test_a_steps_surrogate_is_excused_and_a_wrong_gradient_where_it_moves_is_not():
    assert gradscope.check(f"{CORPUS}:RoundSTE", x="0.2,1.7").inputs[0].status == "surrogate"
    wrong = gradscope.check(f"{CORPUS}:SignFlip", x="0.2,1.7")
    assert not wrong.passed and wrong.inputs[0].status == "mismatch"


def test_a_surrogate_inconsistent_at_a_coarse_scale_is_never_excused():
    # a straight-through gradient of 2 integrates to twice the forward's rise: stepped, but
    # its coarse-scale check fails, so the flatness proves nothing
    target = f"{DATA}/branches.py:RoundSTETwice"
    facts = _facts("check", target)
    assert bool(facts.stepped["x"].any()) and bool(facts.inconsistent["x"].any())
    report = gradscope.check(target)
    assert not report.passed and report.inputs[0].status == "mismatch"
    declared = gradscope.check(target, surrogate="x")  # declared: the user's word stands
    assert declared.passed and declared.inputs[0].status == "surrogate"


def test_an_intended_form_is_a_named_check_that_passes_only_where_autograd_follows_it():
    right = gradscope.check(f"{CORPUS}:ClampPassThrough", x="-2,-0.5,0.5,2",
                            surrogate="x=x")
    (check,) = [c for c in right.upstream_checks if "intended surrogate" in c.label]
    assert right.passed and check.passed and "(--surrogate x=x)" in check.label
    wrong = gradscope.check(f"{CORPUS}:ClampPassThrough", x="-2,-0.5,0.5,2",
                            surrogate="x=2*x")
    (check,) = [c for c in wrong.upstream_checks if "intended surrogate" in c.label]
    assert not wrong.passed and not check.passed
    # (how it departs, named: the headline says it)
    assert "autograd = 0.5 × the intended gradient" in check.label
    assert "0.5 × the intended gradient" in headline(wrong)


def test_a_declaration_that_was_not_needed_is_a_note():
    report = gradscope.check("sin(x)", x="0.5,1", surrogate="x")
    assert report.passed and any("the declaration is not needed" in n for n in report.notes)
