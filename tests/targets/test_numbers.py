"""The user's own numbers: --arg values, defaults and constants written in the code (not
exponents, dimensions, indices or defaults twice)."""

from __future__ import annotations

import inspect

from gradscope.targets.numbers import given, written
from gradscope.targets.signature import Param
from tests.data import branches


def test_args_and_defaults():
    params = [Param("x"), Param("scale", 2.0), Param("flag", True), Param("one", 1.0)]
    assert given({}, params) == {"scale (its default 2.0)": 2.0}
    assert given({"scale": 3}, params) == {"scale (--arg scale=3)": 3.0}


def test_constants_written_in_the_code_and_in_its_user_base_classes():
    found = written(branches.LeakySwishBug)  # 0.1 is in the base class's forward
    assert any(label.startswith("the constant 0.1 in branches.py:") for label in found)
    cube = written(branches.WideCube)
    assert 0.5 in cube.values() and 2.0 not in cube.values()  # x ** 2's 2 is an exponent
    assert 3 in cube.values()
    assert written(branches.scaled_matmul) == {}  # its 2.0 is a default: `given`'s


def test_unreadable_source_gives_nothing():
    assert written(len) == {} and written(inspect) is not None
