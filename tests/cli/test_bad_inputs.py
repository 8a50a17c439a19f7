"""The bad-input catalogue: every row of docs/errors.md's table is run here and must exit with
its code and say its message — one line, no traceback (exit 3 shows the user's frames)."""

from __future__ import annotations

import re
import shlex

import pytest

from gradscope.cli import main
from tests.paths import ROOT

ERRORS = (ROOT / "docs" / "errors.md").read_text()
SECTION = ERRORS.split("# Errors", 1)[1].split("\n## ", 1)[0]
ROWS = re.findall(r"^\| `gradscope (.+?)` \| (\d) \| (.+?) \|$", SECTION, re.M)


def test_catalogue_is_large():
    assert len(ROWS) >= 40


@pytest.mark.slow
@pytest.mark.parametrize("command, code, fragment", ROWS, ids=[r[0][:60] for r in ROWS])
def test_bad_input(command, code, fragment, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    with pytest.raises(SystemExit) as info:
        main(shlex.split(command))
    out, err = capsys.readouterr()
    assert info.value.code == int(code), err
    assert fragment.replace("`", "`") in err, err
    assert out == ""
    assert "Traceback" not in err
    if int(code) == 2:
        assert len(err.strip().splitlines()) == 1, err
        assert err.startswith("gradscope: error: ")
    else:
        assert "gradscope/" not in err  # the user's frames only
