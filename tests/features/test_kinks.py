"""Kinks in the stencil: the element is nondifferentiable, never a mismatch, and the op and
place are named."""

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
