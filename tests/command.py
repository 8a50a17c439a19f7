"""The command line as the tests run it: gradscope's main() in-process, its exit code and
what it printed."""

from __future__ import annotations

import pytest

from gradscope.cli import main


def run(capsys, *args: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `gradscope ARGS`."""
    with pytest.raises(SystemExit) as info:
        main(list(args))
    out, err = capsys.readouterr()
    return info.value.code, out, err
