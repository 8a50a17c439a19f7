"""Custom Functions checked in place on every run of user code: each class named with its
file and line and its verdict; a declared surrogate excuses it only where the declaration
reaches (a wrong Function whose gradient flows to an undeclared input still fails). Gradient
hooks registered in the forward likewise: one that changes a gradient is named with its line."""

import pytest

import gradscope
from gradscope.report.status import Status

GPT = "tests/data/gpt.py"
TOKENS = {"tokens": "randint(0,97,(2,9))"}


def _in_place(report):
    return [c for c in report.upstream_checks if "checked in place" in c.label]


@pytest.mark.slow
def test_each_custom_function_is_checked_per_element_where_it_ran():
    report = gradscope.check(f"{GPT}:tiny_loss", const=TOKENS)
    assert report.passed
    (check,) = _in_place(report)
    # two blocks, each GELU over 2×8 tokens × 64 hidden units
    assert check.label.startswith("TanhGELU.backward (gpt.py:")
    assert "2 call(s), 2,048 argument element(s)" in check.label
    assert check.result == Status.OK


@pytest.mark.slow
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


INPLACE = "tests/data/inplace.py"
ZOO_SEQ = "tests/data/zoo_seq.py"


def test_a_hook_that_changes_the_gradient_fails_with_its_line():
    report = gradscope.check(f"{ZOO_SEQ}:lstm_bad_loss", const={"tokens": "randint(0,50,(2,5))"},
                             only="*.bias_hh_l0")  # (the check in place covers the rest)
    (check,) = _in_place(report)
    assert check.label.startswith("gradient hook LSTMLM.forward.<locals>.<lambda> (zoo_seq.py:")
    assert check.result == Status.MISMATCH and not report.passed
    (culprit,) = [d for d in report.diagnostics if d.kind == "culprit"]
    assert "0.5 × what it was given" in culprit.message and culprit.factor == 0.5


def test_hooks_that_only_look_pass_and_a_clamp_fails_only_where_it_clamps():
    report = gradscope.check(f"{INPLACE}:logged", at={"x": "randn(5)"})
    assert report.passed and len(_in_place(report)) == 2
    assert all(c.result == Status.OK for c in _in_place(report))
    small = gradscope.check(f"{INPLACE}:clipped", at={"x": "uniform(-0.1,0.1,4)"})
    assert small.passed  # its gradient 6x stays inside [−1, 1]: the clamp changes nothing
    large = gradscope.check(f"{INPLACE}:clipped", at={"x": "[1,2,-3,0.01]"})
    (check,) = _in_place(large)
    assert not large.passed and check.result == Status.MISMATCH and check.mismatches == 3


def test_a_reversal_hook_is_excused_only_where_declared():
    values = {"x": "randn(6)", "y": "randn(6)"}
    plain = gradscope.check(f"{INPLACE}:reversed_by_hook", at=values)
    assert not plain.passed
    declared = gradscope.check(f"{INPLACE}:reversed_by_hook", at=values, surrogate="x")
    (check,) = _in_place(declared)
    assert declared.passed and check.result == Status.SURROGATE
    elsewhere = gradscope.check(f"{INPLACE}:reversed_by_hook", at=values, surrogate="y")
    assert not elsewhere.passed  # declared for y, whose gradient the hook never touches


ZOO_CONV = "tests/data/zoo_conv.py"
IMAGES = {"x": "randn(2,3,8,8)"}
LABELS = {"labels": "randint(0,10,(2,))"}


@pytest.mark.slow
def test_a_function_whose_apply_was_bound_at_import_is_checked_and_named():
    # (ResNet's blocks keep `ClampedReLU.apply` as an attribute; batch norm in train mode)
    right = gradscope.check(f"{ZOO_CONV}:resnet_loss", at=IMAGES, const=LABELS,
                            only="*.layer3.*")
    assert right.passed and _in_place(right) == []
    wrong = gradscope.check(f"{ZOO_CONV}:resnet_bad_loss", at=IMAGES, const=LABELS,
                            only="*.layer3.*")
    (check,) = _in_place(wrong)
    assert check.label.startswith("ClampedReLU.backward (zoo_conv.py:")
    # (backward reaches the two calls of layer3 only: the rest is held as data)
    assert "2 call(s)" in check.label and check.result == Status.MISMATCH
    assert any(f.subject == check.label for f in wrong.failures)


def test_a_function_target_wrong_only_under_other_upstreams_is_its_own_culprit():
    import torch

    from tests.data import normalised

    x = torch.linspace(-1, 1, 12, dtype=torch.float64).reshape(3, 4)
    for target in (normalised.RowSoftmaxBug, normalised.RowSoftmaxBug.apply):
        report = gradscope.check(target, x)
        # the table's upstream of ones has a zero VJP: it agrees; the random ones do not
        assert not report.passed and report.inputs[0].status_counts == {"ok": 12}
        (culprit,) = [d for d in report.diagnostics if d.kind == "culprit"]
        assert culprit.op.startswith("RowSoftmaxBug.backward (normalised.py:")
    assert gradscope.check(normalised.RowSoftmax, x).passed
