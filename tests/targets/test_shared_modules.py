"""A module a function reaches by several names is copied once and checked once, under its
shortest name, the other names said."""

from __future__ import annotations

import gradscope
from tests.paths import DATA


def test_one_module_reached_twice_is_checked_once_under_its_shortest_name():
    report = gradscope.check(f"{DATA}/function_shapes.py:through_two_names",
                             at={"x": "randn(3)"})
    assert report.passed, report.to_text()
    names = [i.name for i in report.inputs]
    assert "first.weight" in names and "alias.0.weight" not in names
    assert sum(i.total for i in report.inputs if i.name != "x") == 21  # 4·3+4 + 4+1, once
    assert any("first is alias.0" in n for n in report.notes), report.notes
    assert any("first.weight is also alias.0.weight" in n for n in report.notes)
