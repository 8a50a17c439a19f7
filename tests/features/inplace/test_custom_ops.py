"""A torch.library custom op's registered backward is a culprit like any Function's: checked in
place, and named by its op, its `def` line and its argument's name from the op's schema."""

from __future__ import annotations

import re
from pathlib import Path

import gradscope
from tests.paths import DATA

OPS = f"{DATA}/custom_ops.py"


def _line(name: str) -> int:
    text = Path(OPS).read_text(encoding="utf-8").splitlines()
    return next(i for i, t in enumerate(text, 1) if t.startswith(f"def {name}("))


def test_a_wrong_registered_backward_is_named_with_its_op_line_and_argument():
    report = gradscope.check(f"{OPS}:uses_sine_bug", at={"x": "randn(4,3)"})
    assert not report.passed
    culprit = next(d for d in report.diagnostics if d.kind == "culprit")
    line = _line("_sine_bug_backward")
    # (named by its own name too: the function the user wrote and registered)
    assert re.search(rf"the backward _sine_bug_backward registered for custom op "
                     rf"gradscope_culprits::sine_bug "
                     rf"\(custom_ops.py:{line}\) is wrong for its argument x: autograd = 1.5 ×",
                     culprit.message), culprit.message


def test_a_right_one_passes_checked_in_place():
    report = gradscope.check(f"{OPS}:uses_sine", at={"x": "randn(4,3)"})
    assert report.passed, report.to_text()
    assert "the backward _sine_backward registered for custom op gradscope_culprits::sine" in \
        " ".join(report.to_text().split())


def test_an_op_writing_into_an_argument_its_schema_declares_unchanged_fails_the_run():
    # (its gradient is right: only the schema is wrong, as opcheck's test_schema would say)
    report = gradscope.check(f"{OPS}:uses_exp_scratch", at={"x": "randn(4)"})
    assert not report.passed and all(i.status == "ok" for i in report.inputs)
    (found,) = [d for d in report.diagnostics if d.kind == "undeclared_mutation"]
    assert "gradscope_culprits::exp_scratch writes into its argument(s) x" in found.message
    assert "mutates_args=('x',)" in found.hint
    assert [f.kind for f in report.failures] == ["undeclared_mutation"]
    # the twin writes into its own copy: nothing to say
    twin = gradscope.check(f"{OPS}:uses_exp_copy", at={"x": "randn(4)"})
    assert twin.passed and not [d for d in twin.diagnostics
                                if d.kind == "undeclared_mutation"]


def test_a_write_the_schema_declares_is_no_finding():
    from gradscope.features.inplace.custom_ops import Registered, undeclared
    op = Registered("ns::op", ("x", "out", "y"), "", writes=("out",))
    assert undeclared(op, {"out"}) == ()
    assert undeclared(op, {"out", "y"}) == ("y",)
