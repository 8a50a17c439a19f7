"""What users wrote is shown, never interpreted: terminal escapes spelled out, rich markup
and HTML shown as text, XML kept well-formed."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from rich.console import Console

from gradscope.render.cells import fence, md, md_code, printable, xml_safe
from gradscope.render.suite import junit_xml, markdown, show
from gradscope.suite.results import CheckResult, SuiteReport

HOSTILE = "evil\x1b[2J[bold]<script>x</script>|\x07`name"


def _suite() -> SuiteReport:
    return SuiteReport("cfg\x1b.toml", [CheckResult(HOSTILE, HOSTILE, "check", "raised", 0.1,
                                                    error=f"boom {HOSTILE}\n```\nmore")])


def test_helpers():
    assert printable("a\x1b[31mb") == "a\\x1b[31mb" and printable("a\nb\tc") == "a\nb\tc"
    assert md("<b>|x`") == "&lt;b&gt;\\|x\\`" and md_code("a`b|c") == "aˋb\\|c"
    assert fence("x ``` y") == "````" and xml_safe("a\x00b\x1bc") == "abc"


def test_junit_is_well_formed_with_control_characters_in_names():
    root = ET.fromstring(junit_xml(_suite()))
    case = root.find(".//testcase")
    assert case.get("name").startswith("evil[2J") and "\x1b" not in case.get("name")


def test_markdown_escapes_html_and_keeps_fences_closed():
    text = markdown(_suite())
    (heading,) = [line for line in text.splitlines() if line.startswith("## ")]
    assert "<script>" not in heading and "&lt;script&gt;" in heading  # HTML outside code
    (row,) = [line for line in text.splitlines() if line.startswith("| evil")]
    assert len(re.findall(r"(?<!\\)`", row)) == 2  # only the target's code span
    assert "\x1b" not in text and "````" in text  # the error's ``` cannot close its fence


def test_terminal_output_shows_escapes_and_markup_as_text():
    console = Console(width=200, record=True, color_system=None)
    show(_suite(), console)
    out = console.export_text()
    assert "\x1b" not in out and "\\x1b[2J[bold]" in out


def test_the_run_summary_shortens_messages_at_a_word_boundary():
    long = "the target failed because " + " ".join(f"word{k}" for k in range(30))
    suite = SuiteReport("c.toml", [CheckResult("c", "t", "check", "raised", 0.1, error=long)])
    console = Console(width=250, record=True, color_system=None)
    show(suite, console)
    row = next(line for line in console.export_text().splitlines()
               if "the target failed" in line and line.rstrip().endswith("0.10 s"))  # summary
    shown = row.split("the target failed", 1)[1].rsplit("0.10 s", 1)[0].strip()
    assert shown.endswith("…") and all(w.startswith("word") or w in ("because", "…")
                                        for w in shown.split())
