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


def test_the_report_is_frozen_and_passed_is_no_failures():
    import dataclasses

    import pytest

    report = gradscope.check("x * y", x="1,2", y="3,4")
    assert report.passed and report.failures == []
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.passed = False  # type: ignore[misc]
    failing = gradscope.check("tests/data/corpus.py:SignFlip", x="0.5,1")
    kinds = [f.kind for f in failing.failures]
    assert not failing.passed and kinds[0] == "mismatch" and set(kinds[1:]) == {"check"}


def test_engine_columns_are_read_by_name_and_laid_out_under_the_contracts_keys():
    item = gradscope.check("x * y", x="1,2", y="3,4").inputs[0]
    assert list(item.columns) == ["autograd", "symbolic", "finite_difference"]
    assert item.autograd == [3.0, 4.0] and item.symbolic == [3.0, 4.0]
    assert item.symbolic_skipped is None and item.finite_difference_mode == "elementwise"
    data = item.to_dict()
    assert list(data)[:7] == ["name", "role", "shape", "values", "autograd", "symbolic",
                              "finite_difference"]
    assert data["finite_difference_error"] and "columns" not in data
    # (what a renderer needs to draw it again: each column's heading, the rows a table shows)
    assert data["column_labels"]["finite_difference"] == "finite diff" and "rows" in data
    python_item = gradscope.check("tests/data/functions.py:cumulative", x="1,2").inputs[0]
    assert python_item.symbolic is None
    assert python_item.symbolic_skipped.startswith("Python code has no symbolic form")
