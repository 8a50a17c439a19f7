"""A suite's renderings: the summary table, markdown for a step summary, JUnit XML with one
test case per check and the failure's explanation."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import gradscope
from gradscope.render.suite import junit_xml, markdown
from gradscope.suite.results import CheckResult, SuiteReport


def _suite() -> SuiteReport:
    ok = gradscope.check("x * 2", x="1,2")
    bad = gradscope.check("tests/data/corpus.py:SignFlip", x="0.5,1")
    return SuiteReport("pyproject.toml", [
        CheckResult("doubles", "x * 2", "check", "passed", 0.1, ok),
        CheckResult("flips", "corpus.py:SignFlip", "check", "failed", 0.2, bad),
        CheckResult("raises", "broken.py:f", "check", "raised", 0.0, error="ValueError: no")])


def test_junit_has_a_case_per_check_and_explains_the_failure():
    root = ET.fromstring(junit_xml(_suite()))
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == ["doubles", "flips", "raises"]
    assert cases[0].find("failure") is None
    failure = cases[1].find("failure")
    assert failure is not None and "−1 × the derivative" in failure.get("message")
    assert cases[2].find("error") is not None or cases[2].find("failure") is not None


def test_markdown_summary_names_each_outcome():
    text = markdown(_suite())
    for fragment in ("doubles", "flips", "raises", "passed", "failed"):
        assert fragment in text
