"""The pytest helper raises with the table of what is wrong, and passes quietly otherwise."""

from __future__ import annotations

import inspect
import sys

import pytest
import torch

import gradscope
from gradscope.testing import assert_gradients
from tests.paths import EXAMPLES

sys.path.insert(0, str(EXAMPLES))
from buggy_functions import KillHeadForgetful
from seed_functions import KillHead

sys.path.pop(0)


def test_passes_and_returns_report():
    report = assert_gradients(KillHead, torch.randn(3, 8, dtype=torch.float64), 2)
    assert report.passed


def test_buggy_function_raises_with_table():
    with pytest.raises(AssertionError) as info:
        assert_gradients(KillHeadForgetful, torch.randn(3, 8, dtype=torch.float64), 2)
    message = str(info.value)
    assert "mismatch" in message and "autograd" in message and "finite diff" in message
    assert "0,0" in message


def test_expression_and_tolerances():
    assert_gradients("sin(x) * y", x=torch.randn(4), y=torch.randn(4), rtol=1e-5)


def test_fixture_is_installed(assert_gradients):
    assert assert_gradients("x * x", x=torch.ones(2)).passed


def test_api_returns_seed_numbers():
    a, b, c = (torch.tensor(v, dtype=torch.float64) for v in ([1.0, 2, 3], [3.0, 4, 5],
                                                             [6.0, 7, 8]))
    report = gradscope.check("3*a + 2*b*b + log(c)", a=a, b=b, c=c,
                             grad=torch.tensor([0.1, 1, 1e-4], dtype=torch.float64))
    got = {i.name: i.autograd for i in report.inputs}
    assert got["a"] == pytest.approx([0.3, 3.0, 3e-4])
    assert got["b"] == pytest.approx([1.2, 16.0, 2e-3])
    assert got["c"] == pytest.approx([1 / 60, 1 / 7, 1.25e-5])
    assert report.passed and json_ok(report)


def json_ok(report) -> bool:
    import json

    return json.loads(report.to_json())["passed"] is True


def test_assertion_failures_hide_gradscope_frames_in_pytest():
    from gradscope.testing import assertions

    source = inspect.getsource(assertions.assert_gradients)
    assert "__tracebackhide__ = True" in source


def test_hints_are_put_in_python_terms():
    from gradscope.testing.assertions import in_python_terms

    assert in_python_terms("declare it with --surrogate NAME") == (
        "declare it with the @gradscope.surrogate marker on the Function (or surrogate=[NAME])")
    assert in_python_terms("give values: --at x=… or raise --max-fd 10") == (
        "give values: x=… or raise max_fd=10")
    assert in_python_terms("--max-elements-total and --max-elements") == (
        "max_elements_total= and max_elements=")
    assert in_python_terms("a --dtype-free sentence") == "a --dtype-free sentence"
