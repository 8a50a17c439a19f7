"""Targets: elementwise analysis, domains for default inputs, Python-target recognition."""

from __future__ import annotations

import pytest

from gradscope.errors import UsageError
from gradscope.targets import resolve


@pytest.mark.parametrize("expr, elementwise", [
    ("3*a + 2*b*b + log(c)", {"a", "b", "c"}),
    ("sum(x) * y", {"y"}),
    ("x @ y + z", {"z"}),
    ("softmax(x) + y", {"y"}),
    ("where(x > 0, x, y)", {"x", "y"}),
    ("x * mean(y) + y", {"x"}),
])
def test_elementwise_inputs(expr, elementwise):
    assert resolve(expr).elementwise_inputs == elementwise


def test_is_elementwise():
    assert resolve("sin(x) * y").is_elementwise
    assert not resolve("sum(x)").is_elementwise


def test_domains():
    t = resolve("log(c) + sqrt(d) + asin(e1) + log(a*b)")
    assert t.domain("c") == (0.1, 2.0) and t.domain("d") == (0.1, 2.0)
    assert t.domain("e1") == (-0.9, 0.9)
    assert t.domain("a") is None


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
