"""Kinks in the stencil: the element is nondifferentiable, never a mismatch, and the op and
place are named.

Kink diagnostics name the op and what crossing it means (from the op table)."""

from __future__ import annotations

import gradscope


def test_a_kink_is_named_with_its_op():
    report = gradscope.jvp("abs(x)", x="-1,0,2")
    assert report.passed
    assert report.inputs[0].status_counts == {"ok": 2, "nondifferentiable": 1}
    (found,) = [d for d in report.diagnostics if d.kind == "nondifferentiable_point"]
    assert "abs" in found.message


def test_no_kink_no_diagnostic():
    report = gradscope.jvp("abs(x)", x="-1,2")
    assert not [d for d in report.diagnostics if d.kind == "nondifferentiable_point"]


def _kink(report):
    return [d for d in report.diagnostics if d.kind == "nondifferentiable_point"]


def test_a_kink_a_jump_and_a_pole_are_told_apart():
    (kink,) = _kink(gradscope.check("abs(x)", x="0,1"))
    assert kink.op == "abs" and "of a kink of `abs(x)`" in kink.message
    (jump,) = _kink(gradscope.check("floor(x) + x", x="1,0.5"))
    assert jump.op == "floor" and "of a jump of" in jump.message
    (pole,) = _kink(gradscope.check("1 / x", x="1e-9,1"))
    assert pole.op == "div" and "pole or edge of the domain" in pole.message
    assert pole.indices == {"x": [[0]]}


def test_a_constant_argument_that_decides_the_kink_leaves_the_op_out():
    assert not _kink(gradscope.check("x ** 2 + x / 3", x="0,1"))


def test_nan_diagnostic_names_the_inputs():
    report = gradscope.check("sqrt(x)", x="-1,1")
    assert any(d.kind == "nan" and d.inputs == ["x"] for d in report.diagnostics)
