"""Every command has help text and a README section; help lists exactly the op table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gradscope.cli.app import FUNCTION_NAMES, app
from gradscope.expr.ops import FUNCTIONS

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()
COMMANDS = [c.name or c.callback.__name__ for c in app.registered_commands]


def test_help_lists_exactly_the_op_table():
    assert sorted(FUNCTION_NAMES.split()) == sorted(FUNCTIONS)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command):
    info = next(c for c in app.registered_commands if (c.name or c.callback.__name__) == command)
    assert info.help and len(info.help) > 20


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_is_in_the_readme(command):
    assert re.search(rf"gradscope {command}\b", README), command


def test_readme_test_command_is_what_ci_runs():
    ci = (Path(__file__).resolve().parents[2] / ".ci" / "run").read_text()
    match = re.search(r"```(?:bash|sh)?\n# test\n(.+?)\n```", README, re.S)
    assert match, "README needs a fenced block starting with '# test'"
    for line in match.group(1).strip().splitlines():
        assert line.strip() in ci
