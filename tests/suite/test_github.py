"""CI conventions of `gradscope run`: the nearest config upward, config defaults for `check`,
JUnit classnames, --summary, and GitHub's annotations and step summary."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gradscope.suite.config import defaults_near, nearest
from tests.command import run as _main
from tests.paths import DATA, ROOT

CONFIG = f"""
[tool.gradscope]
dtype = "float32"
seed = 7

[[tool.gradscope.checks]]
name = "fine"
target = "x*2"

[[tool.gradscope.checks]]
name = "batch-mean"
target = "{DATA}/corpus.py:linear_batch_mean"
at = {{x = "randn(4,3)", w = "randn(2,3)", b = "randn(2)"}}
"""


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text(CONFIG)
    deeper = tmp_path / "src" / "pkg"
    deeper.mkdir(parents=True)
    monkeypatch.chdir(deeper)
    return tmp_path


def test_the_nearest_pyproject_upward_configures_run_and_check(project):
    assert nearest().resolve() == (project / "pyproject.toml").resolve()
    assert defaults_near()[0] == {"dtype": "float32", "seed": 7}




def test_check_takes_config_defaults_the_command_line_does_not_give(project, capsys):
    code, out, _ = _main(capsys, "check", "x*2", "--json")
    report = json.loads(out)
    assert code == 0 and report["dtype"] == "float32" and report["seed"] == 7
    assert any("defaults from [tool.gradscope]" in n for n in report["notes"])
    code, out, _ = _main(capsys, "check", "x*2", "--json", "--dtype", "float64")
    assert json.loads(out)["dtype"] == "float64" and json.loads(out)["seed"] == 7


@pytest.mark.slow
def test_one_run_writes_junit_and_markdown_and_github_gets_annotations(project, capsys,
                                                                      monkeypatch):
    summary = project / "step.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    junit, markdown = project / "junit.xml", project / "summary.md"
    code, _, err = _main(capsys, "run", "--junit-xml", str(junit), "--summary", str(markdown),
                         "--jobs", "1")
    assert code == 1
    assert markdown.read_text().startswith("# gradscope run") and summary.read_text() == \
        markdown.read_text()
    assert 'classname="gradscope.' in junit.read_text()
    (annotation,) = [line for line in err.splitlines() if line.startswith("::error")]
    source = Path(f"{DATA}/corpus.py").read_text().splitlines()
    line = int(annotation.split("line=")[1].split(",")[0])
    # (at the culprit's backward, the line to fix: not the target's def, nor a decorator)
    assert source[line - 1].strip().startswith("def backward")
    assert any(text.startswith("class LinearBatchMean") for text in source[line - 12:line])
    assert "0.25 × the derivative" in annotation and "batch-mean" in annotation


@pytest.mark.slow
def test_one_annotation_per_failure_with_paths_from_the_workspace(project, capsys, monkeypatch):
    # the documented workflow, run from a sub-folder of the checkout: GitHub reads both
    # streams, so each failure is announced on one; and its file is named from the workspace
    # root (GITHUB_WORKSPACE), where GitHub looks for it
    model = project / "mymodel.py"
    model.write_text(Path(f"{DATA}/corpus.py").read_text())
    (project / "pyproject.toml").write_text(CONFIG.replace(f"{DATA}/corpus.py", "mymodel.py"))
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_WORKSPACE", str(project))
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    code, out, err = _main(capsys, "run", "--output-format", "github", "--jobs", "1")
    assert code == 1
    errors = [line for line in (out + err).splitlines() if line.startswith("::error")]
    assert len(errors) == 1 and errors[0] in out.splitlines()
    assert errors[0].startswith("::error file=mymodel.py,line=")
    # the same check without a workspace named: the repository's root is the base
    monkeypatch.delenv("GITHUB_WORKSPACE")
    (project / ".git").mkdir()
    code, out, err = _main(capsys, "run", "--jobs", "1")
    errors = [line for line in (out + err).splitlines() if line.startswith("::error")]
    assert len(errors) == 1 and errors[0].startswith("::error file=mymodel.py,line=")


def test_version_short_flag_and_the_pre_commit_hook():
    done = subprocess.run([sys.executable, "-m", "gradscope", "-V"], capture_output=True,
                          text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0 and done.stdout.startswith("gradscope ")
    hooks = (ROOT / ".pre-commit-hooks.yaml").read_text()
    assert "id: gradscope" in hooks and "entry: gradscope run" in hooks
    # the user's own environment: never a second, unpinned torch in a hook environment
    assert "language: system" in hooks and "additional_dependencies" not in hooks


def test_the_example_workflow_installs_from_source_not_from_an_index():
    workflow = (ROOT / "examples" / "ci" / "github-actions.yml").read_text()
    install = workflow.split("name: Install", 1)[1].split("- name:", 1)[0]
    assert "gradscope-cli\n" not in install and "pip install -e . gradscope" not in install
    assert '"$GRADSCOPE_SOURCE"' in install and "exit 2" in install
