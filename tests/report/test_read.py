"""A report read back from its JSON is the same report: what every renderer reads, without
running a check again; statuses as Status, "nan"/"inf" back to floats only where a field holds
numbers, and a report written before its columns' headings were kept still reads."""

from __future__ import annotations

import json
import math

import pytest

import gradscope
from gradscope.report.model import Report
from gradscope.report.status import Status
from tests.paths import DATA


@pytest.mark.parametrize("make", [
    lambda: gradscope.jvp("3*a + 2*b*b + log(c)", a="1,2,3", b="3,4,5", c="6,7,8",
                          grad="0.1,1,1e-4"),
    lambda: gradscope.jvp("sin(x) * y", x="1,2", y="3,4", tangent={"x": "1,0", "y": "0,1"}),
    lambda: gradscope.check("log(x)", at={"x": "-1,2,0"}),
    lambda: gradscope.check(f"{DATA}/mixed.py:HeadBug", shape={"x": (3, 8)}),
    lambda: gradscope.check(f"{DATA}/models.py:loss"),
], ids=["jvp", "tangent", "nonfinite", "culprit", "model"])
def test_a_report_read_back_from_its_json_is_the_same_report(make):
    # what every renderer reads, without running a check again (Report.from_dict)
    report = make()
    back = Report.from_json(report.to_json())
    assert back.to_json() == report.to_json()
    assert back.to_text() == report.to_text() and back.to_markdown() == report.to_markdown()
    assert back.passed == report.passed and back.inputs[0].status == report.inputs[0].status
    assert isinstance(back.inputs[0].status, Status)


def test_non_finite_numbers_come_back_as_floats_and_text_stays_text():
    report = gradscope.check("log(x)", at={"x": "-1,2,0"})
    data = json.loads(report.to_json())
    data["target"] = "inf"  # (a name that reads like a number stays the name)
    back = Report.from_dict(data)
    assert back.target == "inf"
    assert any(isinstance(v, float) and not math.isfinite(v) for v in back.output.values)


def test_a_report_without_its_columns_headings_reads_each_column_by_its_name():
    data = json.loads(gradscope.check("x * y", x="1,2", y="3,4").to_json())
    for item in data["inputs"]:
        del item["column_labels"]
    back = Report.from_dict(data)
    assert list(back.inputs[0].columns) == ["autograd", "symbolic", "finite_difference"]
    assert back.inputs[0].columns["finite_difference"].label == "finite difference"
    assert back.inputs[0].symbolic == [3.0, 4.0]
