"""What a config's check is told before anything runs, without running user code: the target
parses or its file exists, input names fit (read with ast from the file), VALUEs read, the
device is known."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradscope.errors import UsageError
from gradscope.options import Options, Request
from gradscope.suite.precheck import precheck
from tests.paths import DATA


def _check(target: str, base: Path = DATA, **options) -> None:
    precheck(Request("check", target, Options(**options)), base)


def test_what_is_fine_passes():
    _check("sin(x) * y", at={"x": "1,2"}, shape={"y": (2,)})
    _check("functions.py:quantise", at={"x": "1,2", "w": "3,4"})  # relative to the base


@pytest.mark.parametrize("target, options, fragment", [
    ("sin(x", {}, "cannot parse"),
    ("sin(x)", {"at": {"y": "1"}}, "`at` names `y`, which is not an input"),
    ("functions.py:quantise", {"shape": {"z": (2,)}}, "`shape` names `z`"),
    ("missing.py:f", {}, "no such file missing.py"),
    ("sin(x)", {"at": {"x": "randn("}}, "at.x"),
    ("sin(x)", {"device": "tpu"}, "`device` 'tpu'"),
])
def test_what_is_wrong_is_said_before_running(target, options, fragment):
    with pytest.raises(UsageError, match=fragment.replace("(", r"\(")):
        _check(target, **options)


def test_code_is_never_run(tmp_path):
    (tmp_path / "boom.py").write_text("raise SystemExit('imported!')\n\ndef f(x):\n    return x\n")
    _check("boom.py:f", base=tmp_path, at={"x": "1"})  # read with ast: nothing raised
