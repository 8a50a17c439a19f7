"""Report serialisation and the three renderers."""

from __future__ import annotations

import json

import gradscope
from gradscope.render.json import encode


def test_encode_non_finite():
    assert encode([1.0, float("nan"), [float("inf"), -float("inf")]]) == [1.0, "nan",
                                                                          ["inf", "-inf"]]


def test_json_roundtrip_is_asdict():
    report = gradscope.check("x * y", x="1,2", y="3,4")
    data = json.loads(report.to_json())
    assert data == encode(report.to_dict())
    assert data["upstream_checks"][0]["passed"] is True
    assert "forward" not in data


def test_text_table_shows_all_engines_and_verdict():
    text = gradscope.check("abs(x)", x="0,1").to_text()
    for fragment in ("autograd", "symbolic", "finite diff", "nondifferentiable", "PASSED",
                     "nondifferentiable_point", "abs(x)"):
        assert fragment in text


def test_large_table_shows_worst_rows_and_summary():
    text = gradscope.check("abs(x)", x="linspace(-1,1,101)").to_text()
    assert "showing 12 of 101 elements, worst first" in text
    assert "100 ok, 1 nondifferentiable" in text


def test_markdown_marks_problems():
    md = gradscope.check("abs(x)", x="0,1").to_markdown()
    assert "**nondifferentiable**" in md and "### Diagnostics" in md


def test_jacobian_table_labels_out_and_in():
    text = gradscope.jacobian("x * y", x="1,2", y="3,4").to_text()
    assert "out ← in" in text and "1 ← 1" in text
