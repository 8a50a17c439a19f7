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


def test_branches_reached_are_listed_and_a_one_sided_one_marked():
    text = gradscope.check("abs(x) + relu(x - 8)").to_text()
    assert "branches reached" in text
    assert "x in [−6.37, −0.531]: 12 · x = 0: 1 · x in [0.531, 6.37]: 12" in text
    assert "(one side only)" in text
    markdown = gradscope.check("abs(x) + relu(x - 8)").to_markdown()
    assert "| `relu(x - 8)` | x - 8 in \\[−14.4, −1.63\\]: 25 **(one side only)** |" in markdown
