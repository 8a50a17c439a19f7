"""The terminal table: a header, a table per input with a column per engine (worst rows first when
large), the checks, the diagnostics and the verdict line."""

from __future__ import annotations

import gradscope


def test_text_table_shows_all_engines_and_verdict():
    text = gradscope.check("abs(x)", x="0,1").to_text()
    for fragment in ("autograd", "symbolic", "finite diff", "nondifferentiable", "PASSED",
                     "nondifferentiable_point", "abs(x)"):
        assert fragment in text


def test_large_table_shows_worst_rows_and_summary():
    text = gradscope.check("abs(x)", x="linspace(-1,1,101)").to_text()
    assert "showing 12 of 101 elements, worst first" in text
    assert "100 ok, 1 nondifferentiable" in text


def test_jacobian_table_labels_out_and_in():
    text = gradscope.jacobian("x * y", x="1,2", y="3,4").to_text()
    assert "out ← in" in text and "1 ← 1" in text
