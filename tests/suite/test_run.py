"""`gradscope run` as a library call and on the command line: outcomes, exit codes, reports."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from gradscope.suite.run import run_config
from tests.command import run as _cli
from tests.paths import EXAMPLES

PROJECT = """
[tool.gradscope]
seed = 0

[[tool.gradscope.checks]]
name = "expression"
target = "3*a + 2*b*b + log(c)"
command = "jvp"
at = {a = "1,2,3", b = "3,4,5", c = "6,7,8"}
grad = "0.1,1,1e-4"

[[tool.gradscope.checks]]
name = "function"
target = "seed_functions.py:KillHead"
at = {input = "randn(3,8)"}
arg = {n = 2}

[[tool.gradscope.checks]]
name = "broken-module"
target = "buggy_functions.py:KillHeadForgetful"
at = {input = "randn(3,8)"}
arg = {n = 2}
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for name in ("seed_functions.py", "buggy_functions.py"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    (tmp_path / "pyproject.toml").write_text(PROJECT)
    return tmp_path




@pytest.mark.slow
def test_library_call(project):
    suite = run_config(project / "pyproject.toml")
    assert [r.outcome for r in suite.results] == ["passed", "passed", "failed"]
    assert suite.exit_code == 1 and not suite.passed
    seed = suite.results[0].report.inputs
    assert seed[1].autograd == pytest.approx([1.2, 16.0, 2e-3])


@pytest.mark.slow
def test_three_checks_one_failing(project, capsys, monkeypatch):
    monkeypatch.chdir(project)
    code, _, _ = _cli(capsys, "run", "--junit-xml", "junit.xml", "--output", "summary.md",
                        "--format", "markdown")
    assert code == 1
    root = ET.parse(project / "junit.xml").getroot()
    cases = root.findall(".//testcase")
    assert len(cases) == 3
    failures = [c for c in cases if c.find("failure") is not None]
    assert [c.get("name") for c in failures] == ["broken-module"]
    assert "mismatch" in failures[0].find("failure").text
    md = (project / "summary.md").read_text()
    assert "broken-module" in md and "**failed**" in md


@pytest.mark.slow
def test_table_output_and_json(project, capsys):
    code, out, _ = _cli(capsys, "run", str(project / "pyproject.toml"))
    assert code == 1 and "broken-module" in out and "FAILED: 2 passed, 1 failed" in out
    code, out, _ = _cli(capsys, "run", str(project / "pyproject.toml"), "--json")
    data = json.loads(out)
    assert data["schema"] == "gradscope.run/1" and data["exit_code"] == 1
    assert [c["outcome"] for c in data["checks"]] == ["passed", "passed", "failed"]
    assert data["checks"][0]["report"]["schema"] == "gradscope.report/1"


@pytest.mark.slow
def test_raising_check_does_not_stop_the_others(project, capsys):
    (project / "pyproject.toml").write_text(PROJECT + """
[[tool.gradscope.checks]]
name = "raises"
target = "buggy_functions.py:MyLayer"
""")
    code, out, _ = _cli(capsys, "run", str(project / "pyproject.toml"))
    assert code == 3
    assert "raises" in out and "super().__init__()" in out


@pytest.mark.slow
def test_config_error_runs_nothing(project, capsys):
    (project / "pyproject.toml").write_text(PROJECT + """
[[tool.gradscope.checks]]
name = "typo"
target = "x"
atol_typo = 1
""")
    code, out, err = _cli(capsys, "run", str(project / "pyproject.toml"))
    assert code == 2 and out == ""
    assert "check #4 (typo)" in err and "atol_typo" in err


@pytest.mark.slow
def test_example_ci_config_passes(capsys):
    code, out, _ = _cli(capsys, "run", str(EXAMPLES / "ci" / "pyproject.toml"))
    assert code == 0 and "PASSED: 3 passed" in out


# ------------------------------------------------------------------ pytest's and ruff's flags
FAILING_FIRST = """
[[tool.gradscope.checks]]
name = "broken-module"
target = "buggy_functions.py:KillHeadForgetful"
at = {input = "randn(3,8)"}
arg = {n = 2}

[[tool.gradscope.checks]]
name = "after-1"
target = "x * 2"

[[tool.gradscope.checks]]
name = "after-2"
target = "sin(x)"
"""


@pytest.mark.slow
@pytest.mark.parametrize("isolate", [True, False])
def test_exitfirst_stops_at_the_first_failure_and_says_what_did_not_run(project, isolate):
    (project / "pyproject.toml").write_text(FAILING_FIRST)
    suite = run_config(project / "pyproject.toml", exitfirst=True, isolate=isolate, jobs=1)
    assert [r.name for r in suite.results] == ["broken-module"]
    assert suite.not_run == ["after-1", "after-2"] and suite.exit_code == 1
    assert suite.to_dict()["not_run"] == ["after-1", "after-2"]


@pytest.mark.slow
def test_exitfirst_on_the_command_line_with_junit_skips(project, capsys, monkeypatch):
    (project / "pyproject.toml").write_text(FAILING_FIRST)
    monkeypatch.chdir(project)
    code, out, _ = _cli(capsys, "run", "-x", "-q", "--junit-xml", "junit.xml")
    assert code == 1 and "2 not run (stopped at the first failure, -x)" in out
    assert "KillHeadForgetful.backward" not in out  # -q: the summary alone
    cases = ET.parse(project / "junit.xml").getroot().findall(".//testcase")
    assert [c.find("skipped") is not None for c in cases] == [False, True, True]


@pytest.mark.slow
def test_last_failed_reruns_what_did_not_pass(project, capsys, monkeypatch):
    monkeypatch.chdir(project)
    code, _, _ = _cli(capsys, "run", "--lf", "-q")  # nothing recorded yet: every check
    assert code == 1
    assert (project / ".gradscope_cache" / ".gitignore").read_text().endswith("*\n")
    code, out, _ = _cli(capsys, "run", "--lf", "--json")
    data = json.loads(out)
    assert [c["name"] for c in data["checks"]] == ["broken-module"]
    assert "rerunning the 1 check(s) that did not pass last time" in data["notes"][0]
    code, out, _ = _cli(capsys, "run", "--lf", "--co")
    assert code == 0 and out.splitlines()[0].startswith("broken-module")


def test_collect_only_lists_the_selection_and_runs_nothing(project, capsys, monkeypatch):
    monkeypatch.chdir(project)
    code, out, _ = _cli(capsys, "run", "--co", "-k", "*module*", "--json")
    assert code == 0
    assert [c["name"] for c in json.loads(out)["checks"]] == ["broken-module"]
    assert not (project / ".gradscope_cache").exists()  # nothing ran, nothing recorded


def test_nothing_selected_exits_5_like_pytest(project, capsys):
    code, _, err = _cli(capsys, "run", str(project / "pyproject.toml"), "-k", "nomatch")
    assert code == 5 and "matches none of the 3 check(s)" in err
    code, _, err = _cli(capsys, "run", str(project / "pyproject.toml"), "--shard", "4/4",
                        "-k", "module")
    assert code == 5 and "this share of the checks is empty" in err


@pytest.mark.slow
def test_fail_on_for_the_whole_run(project, capsys):
    code, out, _ = _cli(capsys, "run", str(project / "pyproject.toml"), "--fail-on", "never")
    assert code == 0 and "PASSED: 3 passed" in out
    code, _, err = _cli(capsys, "run", str(project / "pyproject.toml"), "--fail-on", "sometimes")
    assert code == 2 and "unknown --fail-on 'sometimes'" in err


@pytest.mark.slow
def test_verbose_shows_the_passing_reports_too(project, capsys):
    _, quiet, _ = _cli(capsys, "run", str(project / "pyproject.toml"))
    _, loud, _ = _cli(capsys, "run", str(project / "pyproject.toml"), "-v")
    assert "expression: passed" not in quiet and "expression: passed" in loud


def test_show_config_prints_each_check_as_it_will_run(project, capsys):
    (project / "pyproject.toml").write_text("[tool.gradscope]\nseed = 7\n" + PROJECT.replace(
        "[tool.gradscope]\nseed = 0\n", ""))
    code, out, _ = _cli(capsys, "run", str(project / "pyproject.toml"), "--show-config",
                        "-k", "expression")
    (check,) = json.loads(out)["checks"]
    assert code == 0 and check["command"] == "jvp"
    assert check["options"]["seed"] == 7 and check["options"]["grad"] == "0.1,1,1e-4"
    assert not (project / ".gradscope_cache").exists()  # nothing ran


@pytest.mark.slow
def test_statistics_count_the_diagnostics_by_kind(project, capsys):
    code, out, _ = _cli(capsys, "run", str(project / "pyproject.toml"), "--statistics", "-q")
    assert code == 1
    tail = out.split("FAILED: 2 passed, 1 failed", 1)[1]
    assert "mismatch_pattern  (broken-module)" in tail


@pytest.mark.slow
def test_output_format_github_prints_the_annotations_only(project, capsys):
    code, out, _ = _cli(capsys, "run", str(project / "pyproject.toml"), "--output-format",
                        "github")
    (line,) = out.splitlines()
    assert code == 1 and line.startswith("::error file=") and "buggy_functions.py" in line
    code, _, err = _cli(capsys, "run", str(project / "pyproject.toml"), "--output-format",
                        "sarif")
    assert code == 2 and "the one format it names is github" in err
