"""What is judged after the engines ran: the verdict's parts come from one set of estimates,
diagnoses decide re-marking, and a failed backward still shows finite differences."""

from __future__ import annotations

import gradscope
from tests.paths import DATA, EXAMPLES


def test_a_failed_backward_shows_finite_differences_and_the_cause():
    report = gradscope.check(f"{DATA}/backwards.py:WrongShape", x="randn(2,3)")
    (x,) = report.inputs
    assert x.autograd is None and x.finite_difference is not None
    assert x.autograd_skipped.startswith("backward failed")
    (diag,) = [d for d in report.diagnostics if d.kind == "backward_shape"]
    assert diag.inputs == ["x"] and diag.count == 6 and not report.passed


def test_surrogate_and_vanishing_inputs_are_re_marked():
    ste = gradscope.check(f"{EXAMPLES}/seed_functions.py:RoundSTE")
    assert ste.passed and ste.inputs[0].status == "surrogate"
    assert any(d.kind == "surrogate_gradient" for d in ste.diagnostics)
    rounded = gradscope.check("sum(round(x) * w)")
    assert {i.name: i.status for i in rounded.inputs} == {"x": "vanishing", "w": "ok"}


def test_a_target_that_exits_is_a_target_error_never_an_exit():
    import pytest

    from gradscope.errors import TargetError

    for name in ("exits", "ExitsInBackward"):
        with pytest.raises(TargetError) as info:
            gradscope.check(f"{DATA}/targets.py:{name}")
        assert "SystemExit: 0" in str(info.value) and "sys.exit" in str(info.value)
        assert "gradscope/" not in str(info.value)  # the user's frames only


def test_what_the_target_prints_is_captured_into_the_report(capsys):
    report = gradscope.check(f"{DATA}/targets.py:prints", x="1,2")
    assert capsys.readouterr().out == ""
    assert report.user_output.startswith("hello from the target\n")
    assert any("the target printed" in n for n in report.notes)
