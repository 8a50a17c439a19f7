"""Custom Functions checked in place on every run of user code: each class named with its
file and line and its verdict; a declared surrogate excuses it only where the declaration
reaches (a wrong Function whose gradient flows to an undeclared input still fails)."""

import gradscope
from gradscope.report.status import Status

GPT = "tests/data/gpt.py"
TOKENS = {"tokens": "randint(0,97,(2,9))"}


def _in_place(report):
    return [c for c in report.upstream_checks if "checked in place" in c.label]


def test_each_custom_function_is_checked_per_element_where_it_ran():
    report = gradscope.check(f"{GPT}:tiny_loss", const=TOKENS)
    assert report.passed
    (check,) = _in_place(report)
    # two blocks, each GELU over 2×8 tokens × 64 hidden units
    assert check.label.startswith("TanhGELU.backward (gpt.py:")
    assert "2 call(s), 2,048 argument element(s)" in check.label
    assert check.result == Status.OK


def test_a_wrong_one_fails_the_run_with_its_line():
    report = gradscope.check(f"{GPT}:tiny_off_loss", const=TOKENS)
    (check,) = _in_place(report)
    assert not check.passed and check.result == Status.MISMATCH and check.mismatches > 0
    assert any(f.kind == "check" and f.subject == check.label for f in report.failures)


def test_a_declared_surrogate_excuses_it_only_where_declared():
    target = "tests/data/inplace.py:reversed_and_square"
    values = {"x": "randn(6)", "y": "randn(6)"}
    everything = gradscope.check(target, at=values, surrogate="*")
    (check,) = _in_place(everything)
    assert everything.passed and check.result == Status.SURROGATE
    only_y = gradscope.check(target, at=values, surrogate="y")
    (check,) = _in_place(only_y)
    assert not only_y.passed and check.result == Status.MISMATCH and not check.passed


def test_a_target_that_is_itself_a_function_is_not_checked_twice():
    report = gradscope.check("tests/data/corpus.py:GradientReversal", at={"x": "randn(4)"},
                             arg={"alpha": 0.5})
    assert not _in_place(report)
