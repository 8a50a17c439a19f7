"""[tool.gradscope] validation: every error found before anything runs, naming check and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradscope.errors import UsageError
from gradscope.suite.config import load


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
    ('[[tool.gradscope.checks]]\ntarget = "x"\ndevice = "tpu"\n', ["`device` 'tpu'"]),
    ('[[tool.gradscope.checks]]\ntarget = "x"\nat = true\n', ["`at` must be a table"]),
    ('[[tool.gradscope.checks]]\ntarget = "x"\ngrad = 2020-01-01\n', ["`grad` must be"]),
    ('[[tool.gradscope.checks]]\ntarget = "x"\nat = {x = {y = 1}}\n', ["`at.x` must be VALUE"]),
    ('[[tool.gradscope.checks]]\ntarget = "x"\nat = {x = [1, nan]}\n', ["at.x", "NaN"]),
    ('[[tool.gradscope.checks]]\ntarget = "x * y"\nshape = {z = [2]}\n',
     ["`shape` names `z`", "inputs are: x, y"]),
    ('[[tool.gradscope.checks]]\ntarget = "x"\ntimeout = 0\n', ["`timeout` must be"]),
    ('[[tool.gradscope.checks]]\ntarget = "x"\nmemory_limit = 100\n',
     ["unknown key `memory_limit`"]),
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


def test_every_error_is_listed_before_anything_runs(tmp_path):
    body = ('[[tool.gradscope.checks]]\nname = "one"\ntarget = "x +"\n'
            '[[tool.gradscope.checks]]\nname = "fine"\ntarget = "x"\n'
            '[[tool.gradscope.checks]]\nname = "two"\ntarget = "x"\nrtoll = 1\n')
    with pytest.raises(UsageError) as info:
        load(_write(tmp_path, body))
    text = str(info.value)
    assert "2 errors" in text and "check #1 (one)" in text and "check #3 (two)" in text


def test_file_targets_resolve_against_the_config_folder_and_are_read_without_running(tmp_path,
                                                                                    monkeypatch):
    folder = tmp_path / "ci"
    folder.mkdir()
    (tmp_path / "ops.py").write_text("raise SystemExit('imported!')\ndef f(x, n):\n    return x\n")
    monkeypatch.chdir(tmp_path)  # ops.py is in the working directory, not beside the config
    with pytest.raises(UsageError, match=r"no such file ops\.py"):
        load(_write(folder, '[[tool.gradscope.checks]]\ntarget = "ops.py:f"\n'))
    good = '[[tool.gradscope.checks]]\ntarget = "../ops.py:f"\narg = {n = 2}\nat = {x = "1"}\n'
    (spec,), _ = load(_write(folder, good))  # parsed with ast: the SystemExit never ran
    assert spec.request.options.arg == {"n": 2}
    bad = '[[tool.gradscope.checks]]\ntarget = "../ops.py:f"\nat = {y = "1"}\n'
    with pytest.raises(UsageError, match=r"`at` names `y`.*inputs are: x, n"):
        load(_write(folder, bad))


def test_surrogate_key_takes_true_or_names(tmp_path):
    body = ('[[tool.gradscope.checks]]\ntarget = "x * y"\nsurrogate = true\n'
            '[[tool.gradscope.checks]]\nname = "y only"\ntarget = "x * y"\n'
            'surrogate = ["y"]\n')
    (first, second), _ = load(_write(tmp_path, body))
    assert first.request.options.surrogate == ("*",)
    assert second.request.options.surrogate == ("y",)
    with pytest.raises(UsageError, match="`surrogate` names `z`"):
        load(_write(tmp_path, '[[tool.gradscope.checks]]\ntarget = "x"\nsurrogate = "z"\n'))


def test_every_error_of_every_check_in_one_pass_with_lines_and_suggestions(tmp_path):
    body = ('[tool.gradscope]\ndtype = "float8"\nsede = 3\n\n'
            '[[tool.gradscope.checks]]\nname = "one"\ntagret = "x * 2"\n\n'
            '[[tool.gradscope.checks]]\nname = "two"\ntarget = "x +"\nrtol = "big"\n'
            'atoll = 1\n')
    with pytest.raises(UsageError) as info:
        load(_write(tmp_path, body))
    lines = str(info.value).splitlines()
    assert "6 errors" in lines[0]
    assert lines[1:] == [
        "  [tool.gradscope], line 2: unknown `dtype` 'float8'; allowed: float64, float32, "
        "float16, bfloat16",
        "  [tool.gradscope], line 3: unknown key `sede`; did you mean `seed`?",
        "  check #1 (one), line 7: unknown key `tagret`; did you mean `target`?",
        "  check #2 (two), line 12: `rtol` must be a number, got 'big'",
        "  check #2 (two), line 13: unknown key `atoll`; did you mean `atol`?",
        "  check #2 (two), line 9: cannot parse expression 'x +': invalid syntax"]


def test_a_bad_default_is_said_once_not_once_per_check(tmp_path):
    body = '[tool.gradscope]\nfail_on = "always"\n' + "".join(
        f'[[tool.gradscope.checks]]\ntarget = "x * {k}"\n' for k in range(3))
    with pytest.raises(UsageError) as info:
        load(_write(tmp_path, body))
    assert str(info.value).count("fail_on") == 1


@pytest.mark.parametrize("body, found", [
    ('[[check]]\ntarget = "x"\n', "[check]"),
    ('[tool.gradscope_checks]\ntarget = "x"\n', "[tool.gradscope_checks]"),
    ('[[tool.gradscope.check]]\ntarget = "x"\n', None),
])
def test_checks_where_gradscope_does_not_look_get_a_suggestion(tmp_path, body, found):
    with pytest.raises(UsageError) as info:
        load(_write(tmp_path, body))
    if found:
        assert f"found {found}: did you mean [tool.gradscope]" in str(info.value)
    else:  # a [tool.gradscope] table whose checks are misnamed
        assert "unknown key `check`; did you mean `checks`?" in str(info.value)
