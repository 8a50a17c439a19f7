"""User text is data in every output: a custom Function's class name, an exception's message
and a check's name made of rich markup, HTML, a markdown link and an ESC sequence are shown as
those characters — never a link, a tag, a style or a terminal command."""

from __future__ import annotations

import io
import json
import re
import xml.dom.minidom

import pytest
from rich.console import Console

import gradscope
from tests.command import run
from tests.paths import ROOT

DATA = ROOT / "tests" / "data"
TARGET = f"{DATA}/hostile_names.py:named"
LINK = re.compile(r"(?<!\\)\]\(")  # a markdown link's `](` not escaped


@pytest.fixture(scope="module")
def report():
    return gradscope.check(TARGET, shape={"x": "3"})


def _no_control(text: str) -> None:
    assert "\x1b" not in text and "\\x1b" in text


def test_the_terminal_table_spells_control_characters_out(capsys):
    code, out, _ = run(capsys, "check", TARGET, "--shape", "x=3")
    assert code == 1 and "[link=x" in out  # shown, not read as markup
    _no_control(out)


def test_a_notebook_display_has_no_link_or_tag(report):
    page = report._repr_html_()
    assert "<a " not in page and "<svg" not in page and "&lt;svg/onload" in page
    assert "\x1b" not in page


def test_rich_print_with_the_callers_console_reads_no_markup(report):
    console = Console(file=io.StringIO(), record=True, width=140, force_terminal=True)
    console.print(report)
    assert "[link=x" in console.export_text() and "<a " not in console.export_html()


def test_markdown_escapes_links_tags_and_cells(report):
    text = report.to_markdown()
    assert not LINK.search(text) and "<svg" not in text and "<b>" not in text
    assert "\\[a\\]" in text
    _no_control(text)


def test_json_carries_the_name_as_it_is(report):
    assert "\x1b" in json.loads(report.to_json())["diagnostics"][-1]["message"]


def test_an_exception_message_is_one_printable_error(capsys):
    code, _, err = run(capsys, "check", f"{DATA}/hostile_names.py:raises", "--shape", "x=3")
    assert code == 3
    _no_control(err)


def test_the_graph_svg_is_well_formed(tmp_path, capsys):
    svg = tmp_path / "g.svg"
    code, out, _ = run(capsys, "graph", TARGET, "--shape", "x=3", "--svg", str(svg))
    assert code == 0
    _no_control(out)
    xml.dom.minidom.parse(str(svg))  # (raises where it is not)


def _config(tmp_path):
    config = tmp_path / "gradscope.toml"
    config.write_text('[tool.gradscope]\n[[tool.gradscope.checks]]\n'
                      'name = "[link=x]<b>\\u001b[31mred|`[a](javascript:x)"\n'
                      f'target = "{TARGET}"\nshape = {{x = "3"}}\n')
    return config


@pytest.mark.slow
def test_run_lists_and_reports_hostile_check_names(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = _config(tmp_path)
    code, out, _ = run(capsys, "run", str(config), "--co")
    assert code == 0 and "[link=x]" in out
    _no_control(out)
    code, out, _ = run(capsys, "run", str(config), "--junit-xml", "j.xml", "--summary", "s.md")
    assert code == 1
    _no_control(out)
    document = xml.dom.minidom.parse(str(tmp_path / "j.xml"))
    names = [c.getAttribute("name") for c in document.getElementsByTagName("testcase")]
    assert names and "[link=x]<b>" in names[0]
    summary = (tmp_path / "s.md").read_text()
    assert not LINK.search(summary) and "<b>" not in summary and "\x1b" not in summary


@pytest.mark.slow
def test_github_output_still_writes_every_requested_file(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = _config(tmp_path)
    code, out, err = run(capsys, "run", str(config), "--output-format", "github",
                         "--junit-xml", "j.xml", "--summary", "s.md", "--output", "o.json",
                         "--format", "json")
    assert code == 1 and out.startswith("::error")
    assert all(line.startswith("::") for line in out.splitlines())
    assert {p.name for p in tmp_path.iterdir()} >= {"j.xml", "s.md", "o.json"}
    assert json.loads((tmp_path / "o.json").read_text())["passed"] is False
    assert "o.json" in err


def test_long_arrays_are_one_line_each_and_read_back_the_same():
    from gradscope.render.json import dumps

    data = {"values": [float(k) for k in range(40)] + [float("nan"), float("-inf")],
            "rows": [[1.0, 2.0]] * 20, "names": ["a"] * 20, "short": [1.0, 2.0]}
    text = dumps(data)
    back = json.loads(text)
    assert back["values"][:3] == [0.0, 1.0, 2.0] and back["values"][-2:] == ["nan", "-inf"]
    assert back["rows"] == [[1.0, 2.0]] * 20 and back["names"] == ["a"] * 20
    assert len(text.splitlines()) < 40  # (one number a line would be over a hundred)


@pytest.mark.slow
def test_github_annotations_spell_out_escape_sequences(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "gradscope.toml"
    config.write_text('[tool.gradscope]\n[[tool.gradscope.checks]]\n'
                      'name = "L\\u001b]8;;http://x\\u001b\\\\link\\r\\n::error::injected"\n'
                      f'target = "{TARGET}"\nshape = {{x = "3"}}\n')
    code, out, _ = run(capsys, "run", str(config), "--output-format", "github")
    assert code == 1 and "\x1b" not in out
    assert all(line.startswith("::") for line in out.splitlines())
    assert not any(line.startswith("::error::injected") for line in out.splitlines())
