"""The text forms of options: shapes, NAME=VALUE items, Python literals."""

from __future__ import annotations

import pytest

from gradscope.errors import UsageError
from gradscope.option_text import parse_assignment, parse_literal, parse_shape


@pytest.mark.parametrize("text, shape", [("2,3", (2, 3)), ("5", (5,)), ("()", ()),
                                         ("(4,)", (4,)), ("scalar", ())])
def test_shapes(text, shape):
    assert parse_shape(text) == shape


@pytest.mark.parametrize("text", ["a", "2,-3", "1.5", "", "2,0"])
def test_bad_shapes(text):
    with pytest.raises(UsageError):
        parse_shape(text)


def test_assignments():
    assert parse_assignment("x=1,2", "--at") == ("x", "1,2")
    assert parse_assignment(" w = [[1]] ", "--at") == ("w", "[[1]]")
    for bad in ("x", "=1", "1x=2", "x="):
        with pytest.raises(UsageError, match="--at"):
            parse_assignment(bad, "--at")


def test_literals_are_read_never_evaluated():
    assert parse_literal("4", "--arg n") == 4
    assert parse_literal("(1, 'a')", "--arg n") == (1, "a")
    with pytest.raises(UsageError, match="is not a Python literal"):
        parse_literal("__import__('os')", "--arg n")
