"""Resolving a TARGET: expression text, file.py:NAME, package.module:NAME or a Python object,
through the kinds in KINDS."""

from __future__ import annotations

import pytest

from gradscope.errors import UsageError
from gradscope.targets import resolve
from tests.paths import SEEDS


@pytest.mark.parametrize("text, fragment", [("my_ops.py:RoundSTE", "no such file"),
                                            ("pkg_absent.mod:Layer", "no module named")])
def test_python_targets_are_recognised(text, fragment):
    with pytest.raises(UsageError, match=fragment):
        resolve(text)


def test_non_target_objects():
    with pytest.raises(UsageError, match="expression string"):
        resolve(42)


def test_callables_resolve_to_python_targets():
    def f(x, y):
        return x * y

    target = resolve(f)
    assert target.kind == "function" and target.names == ("x", "y")


def test_wrong_kind_of_name(tmp_path):
    path = tmp_path / "things.py"
    path.write_text("VALUE = 3\n")
    with pytest.raises(UsageError, match=r"expected a torch\.autograd\.Function"):
        resolve(f"{path}:VALUE")


def test_unknown_arg_name():
    with pytest.raises(UsageError, match="not a parameter"):
        resolve(f"{SEEDS}:KillHead", args={"m": 2})
