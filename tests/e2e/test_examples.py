"""Run every command of examples/README.md and check its documented exit code."""

from __future__ import annotations

import re
import shlex

import pytest

from gradscope.cli import main
from tests.paths import EXAMPLES

TEXT = (EXAMPLES / "README.md").read_text()
COMMANDS = re.findall(r"^\$ (gradscope .+)$", TEXT, re.M)


def test_examples_exist():
    assert len(COMMANDS) >= 10


@pytest.mark.parametrize("line", COMMANDS)
def test_example_command(line, capsys):
    command, _, comment = line.partition("  # ")
    expected = int(re.search(r"exit (\d)", comment).group(1)) if comment else 0
    with pytest.raises(SystemExit) as info:
        main(shlex.split(command)[1:])
    out, err = capsys.readouterr()
    assert info.value.code == expected, err
    assert out if expected != 3 else err
