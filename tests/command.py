"""The command line as the tests run it: gradscope's main() in-process, its exit code and
what it printed."""

from __future__ import annotations

import pytest

from gradscope.cli import main

# the README's quick start, seeds/003's example
SEED_ARGS = ["jvp", "3*a + 2*b*b + log(c)", "--at", "a=1,2,3", "--at", "b=3,4,5",
             "--at", "c=6,7,8", "--grad", "0.1,1,1e-4"]


def run(capsys, *args: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `gradscope ARGS`."""
    with pytest.raises(SystemExit) as info:
        main(list(args))
    out, err = capsys.readouterr()
    return info.value.code, out, err
