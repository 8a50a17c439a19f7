"""[tool.gradscope] validation: every error found before anything runs, naming check and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradscope.errors import UsageError
from gradscope.tools.config import load


def _write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "pyproject.toml"
    path.write_text(body)
    return path


GOOD = """
[tool.gradscope]
dtype = "float64"
seed = 3

[[tool.gradscope.checks]]
name = "seed"
target = "3*a + 2*b*b + log(c)"
command = "jvp"
at = {a = "1,2,3", b = [3, 4, 5], c = 6}
grad = "0.1,1,1e-4"
shape = {a = [3]}

[[tool.gradscope.checks]]
target = "sin(x)"
dtype = "float32"
"""


def test_defaults_and_per_check_fields(tmp_path):
    specs, where = load(_write(tmp_path, GOOD))
    assert where.name == "pyproject.toml"
    first, second = specs
    assert first.name == "seed" and first.request.command == "jvp"
    assert first.request.options.seed == 3 and first.request.options.shape == {"a": (3,)}
    assert first.request.base == tmp_path.resolve()
    assert second.name == "sin(x)" and second.request.options.dtype == "float32"
    assert second.request.command == "check"


@pytest.mark.parametrize("body, fragments", [
    ('[tool.gradscope]\nbogus = 1\n[[tool.gradscope.checks]]\ntarget = "x"\n',
     ["[tool.gradscope]", "unknown key `bogus`"]),
    ('[[tool.gradscope.checks]]\nname = "c1"\ntarget = "x"\ncolour = "red"\n',
     ["check #1 (c1)", "unknown key `colour`"]),
    ('[[tool.gradscope.checks]]\nname = "c1"\n', ["check #1 (c1)", "missing `target`"]),
    ('[[tool.gradscope.checks]]\ntarget = "x"\n[[tool.gradscope.checks]]\ntarget = "x +"\n',
     ["check #2", "cannot parse"]),
    ('[[tool.gradscope.checks]]\ntarget = "x"\nseed = "one"\n', ["`seed` must be"]),
    ('[[tool.gradscope.checks]]\ntarget = "x"\nfull = 1\n', ["`full` must be"]),
    ('[[tool.gradscope.checks]]\ntarget = "x"\ncommand = "graph"\n', ["`command` must be"]),
    ('[[tool.gradscope.checks]]\ntarget = "x"\nfail_on = "always"\n', ["`fail_on`"]),
    ('[[tool.gradscope.checks]]\ntarget = "x"\ndtype = "float8"\n', ["dtype"]),
    ('[[tool.gradscope.checks]]\ntarget = "missing.py:F"\n', ["no such file missing.py"]),
    ('[[tool.gradscope.checks]]\ntarget = "x"\nat = {x = "nan"}\n', ["at.x", "NaN"]),
    ('[[tool.gradscope.checks]]\nname = "a"\ntarget = "x"\n[[tool.gradscope.checks]]\n'
     'name = "a"\ntarget = "y"\n', ["unique", "a"]),
    ('[tool.gradscope]\n', ["no checks"]),
    ('[tool.other]\nx = 1\n', ["no [tool.gradscope] table"]),
    ('not toml [', ["not valid TOML"]),
])
def test_bad_configs(tmp_path, body, fragments):
    with pytest.raises(UsageError) as info:
        load(_write(tmp_path, body))
    for fragment in fragments:
        assert fragment in str(info.value)


def test_missing_config_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match="no config file"):
        load(None)
