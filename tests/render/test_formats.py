"""One output path for every report kind: `render.show` and `render.text` pick the renderer by
the report's schema; each format is one module."""

from __future__ import annotations

import json

import pytest

import gradscope
from gradscope import render
from gradscope.options import Options, Request
from gradscope.tools.graph import graph
from gradscope.tools.sweep import sweep


@pytest.fixture(scope="module")
def reports():
    check = gradscope.check("abs(x) * y", x="0,1", y="2,3")
    return {
        "report": check,
        "graph": graph(Request("check", "sum(round(x) * 2)", Options(at={"x": "0.3,1.6"}))),
        "sweep": sweep(Request("check", "round(x)"), "x", -1.0, 1.0, 20),
    }


@pytest.mark.parametrize("kind", ["report", "graph", "sweep"])
def test_json_is_one_document_with_the_schema(reports, kind):
    data = json.loads(render.text(reports[kind], "json"))
    assert data["schema"] == f"gradscope.{kind}/1"


def test_markdown_and_plain_text_of_a_check(reports):
    md = render.text(reports["report"], "markdown")
    assert md.startswith("## gradscope check") or "| index |" in md
    text = render.text(reports["report"], "table", width=100)
    assert "nondifferentiable" in text and "\x1b[" not in text
    assert max(len(line) for line in text.splitlines()) <= 100


def test_graph_and_sweep_show_rich_output_even_for_markdown(reports):
    assert render.is_rich(reports["graph"], "markdown") and render.is_rich(reports["sweep"],
                                                                           "table")
    assert not render.is_rich(reports["report"], "markdown")
    assert "RoundBackward0" in render.text(reports["graph"], "table")
