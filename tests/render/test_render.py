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


def test_graph_and_sweep_have_a_markdown_form(reports):
    assert not render.is_rich(reports["graph"], "markdown")
    assert render.is_rich(reports["sweep"], "table")
    assert not render.is_rich(reports["report"], "markdown")
    assert "RoundBackward0" in render.text(reports["graph"], "table")
    for kind in ("graph", "sweep"):
        doc = render.text(reports[kind], "markdown")
        assert doc.startswith(f"## gradscope {kind}: `") and doc.count("```") == 2


def test_text_has_no_trailing_spaces_and_pipes_respect_columns(reports, monkeypatch):
    from gradscope.render.console import terminal_console

    for kind in ("report", "graph", "sweep"):
        assert not any(line != line.rstrip() for line in render.text(reports[kind],
                                                                     "table").splitlines())
    monkeypatch.setenv("COLUMNS", "80")
    assert terminal_console().width == 80
    monkeypatch.delenv("COLUMNS")
    assert terminal_console().width == 120  # a pipe (pytest's capture) without COLUMNS


def test_full_shows_every_row_in_the_terminal_table():
    import gradscope

    short = gradscope.check("x*2", shape={"x": [100]}).to_text()
    full = gradscope.check("x*2", shape={"x": [100]}, full=True).to_text()
    assert "showing" in short and "showing" not in full
    assert full.count("  ok") >= 100 > short.count("  ok")
