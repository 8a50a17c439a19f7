"""Every command has help text and a section in the docs; the README is short, its links
resolve, and it points at every docs page; `gradscope ops` lists exactly the op
table; help texts quote the constants the code uses."""

from __future__ import annotations

import json
import re

import pytest

from gradscope.cli import app, main
from gradscope.compare.tolerance import DEFAULT_TOLERANCES
from gradscope.engines.fd.policy import DEFAULT_EPS
from gradscope.expr.ops import FUNCTIONS
from gradscope.options import DEFAULTS, SPECS
from tests.paths import ROOT

README = (ROOT / "README.md").read_text()
DOCS = "\n".join(p.read_text() for p in sorted((ROOT / "docs").glob("*.md")))
COMMANDS = [c.name or c.callback.__name__ for c in app.registered_commands]


def test_ops_lists_exactly_the_op_table(capsys):
    with pytest.raises(SystemExit) as done:
        main(["ops", "--json"])
    assert done.value.code == 0
    rows = json.loads(capsys.readouterr().out)["ops"]
    callable_names = {r["name"] for r in rows if any(s.endswith("(…)") and not s.startswith(
        "x.") for s in r["spellings"])}
    assert callable_names == {op.name for op in FUNCTIONS.values()}
    assert {r["name"]: r["kinks"] for r in rows}["round"] == "jump"


def test_root_help_points_at_the_op_table(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "gradscope ops" in out and "4 an internal error" in out


def test_help_quotes_the_defaults_the_code_uses(capsys):
    with pytest.raises(SystemExit):
        main(["check", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert f"[default: {DEFAULT_EPS:g}]" in out
    assert f"bfloat16 {DEFAULT_TOLERANCES['bfloat16'][0]:g}" in out
    assert f"{DEFAULTS.max_fd}" in out and SPECS["max_fd"].flag in out


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command):
    info = next(c for c in app.registered_commands if (c.name or c.callback.__name__) == command)
    assert info.help and len(info.help) > 20


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_is_in_the_docs(command):
    assert re.search(rf"gradscope {command}\b", DOCS), command


def test_the_readme_is_short_and_its_links_resolve():
    assert len(README.splitlines()) <= 150  # what it is, set-up, three examples, where next
    for page in (ROOT / "docs").glob("*.md"):
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text()):
            assert (page.parent / target).exists(), f"{page.name} links to {target}"
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", README):
        assert (ROOT / target).exists(), f"README links to {target}"
    linked = set(re.findall(r"\]\((docs/[^)#]+)", README))
    assert linked == {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")}


def test_the_readme_never_sends_users_to_an_index_that_has_no_release():
    # "gradscope" on PyPI is another project, and this one has no release there yet
    assert not re.search(r"pip install [\"']?gradscope", README + DOCS)


def test_readme_test_command_is_what_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text()
    match = re.search(r"```(?:bash|sh)?\n# test\n(.+?)\n```", README, re.S)
    assert match, "README needs a fenced block starting with '# test'"
    for line in match.group(1).strip().splitlines():
        assert line.strip() in ci


def test_usage_lines_are_conventional(capsys):
    for command, usage in (("check", "[OPTIONS] TARGET"), ("run", "[OPTIONS] [CONFIG]")):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        out = capsys.readouterr().out
        assert f"Usage: gradscope {command} {usage}" in out and "{" not in out.splitlines()[0]


PYTHON_BLOCKS = [(page.name, block) for page in [ROOT / "README.md",
                                                   *sorted((ROOT / "docs").glob("*.md"))]
                 for block in re.findall(r"```python\n(.*?)```", page.read_text(), re.S)]


@pytest.mark.parametrize("page, block", PYTHON_BLOCKS,
                         ids=[f"{p}:{k}" for k, (p, _) in enumerate(PYTHON_BLOCKS)])
@pytest.mark.slow
def test_the_python_in_the_docs_runs_as_written(page, block, monkeypatch, capsys):
    # every block is whole (its imports and definitions with it); the test functions it
    # defines are called, as pytest would
    monkeypatch.chdir(ROOT)
    before = set(ROOT.iterdir())
    namespace: dict = {"__name__": "docs_block"}
    try:
        exec(compile(block, f"{page} block", "exec"), namespace)  # our docs, not user text
        for name, value in list(namespace.items()):
            if name.startswith("test_") and callable(value):
                value()
    finally:  # files a block writes as a user would ("sweep.svg") leave no trace here
        for made in set(ROOT.iterdir()) - before:
            if made.is_file():
                made.unlink()


def test_the_docs_have_python_to_run():
    assert len(PYTHON_BLOCKS) >= 3


README_RUNS = re.findall(r"^\$ (gradscope [^\n]+)\n(.*?)```", README, re.S | re.M)


@pytest.mark.parametrize("command, shown", README_RUNS, ids=[c[:50] for c, _ in README_RUNS])
def test_the_readmes_examples_print_what_it_shows(command, shown, capsys, monkeypatch):
    import shlex

    monkeypatch.chdir(ROOT)
    with pytest.raises(SystemExit) as done:
        main(shlex.split(command)[1:])
    out = " ".join(capsys.readouterr().out.split())
    verdict = "PASSED" if "PASSED" in shown else "FAILED"
    assert done.value.code == (0 if verdict == "PASSED" else 1)
    for line in shown.splitlines():  # each shown line is in the output (rewrapped), but
        # the round-off sized |error| values, which another CPU may round otherwise
        for part in re.split(r"\s\d\.\d+e-1\d(?:\s|$)", line):
            words = " ".join(part.split())
            if words and not words.startswith("─"):
                assert words in out, words


def test_the_readme_has_examples_to_run():
    assert len(README_RUNS) >= 2
