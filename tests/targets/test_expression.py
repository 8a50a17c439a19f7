"""Targets: elementwise analysis, domains for default inputs, Python-target recognition."""

from __future__ import annotations

import dataclasses

import pytest
import torch

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


def test_numbers_written_in_the_expression():
    assert resolve("3*a + 2*b*b + 1*c - 0.5").numbers() == {
        "the 3 written in the expression": 3.0, "the 2 written in the expression": 2.0,
        "the 0.5 written in the expression": 0.5}


def test_domains():
    t = resolve("log(c) + sqrt(d) + asin(e1) + log(a*b)")
    assert t.domain("c") == (0.1, 2.0) and t.domain("d") == (0.1, 2.0)
    assert t.domain("e1") == (-0.9, 0.9)
    assert t.domain("a") is None


def test_traced_around_reuses_what_does_not_move_and_agrees_with_traced(monkeypatch):
    import gradscope.expr.ops as ops_module

    target = resolve("abs(a) * 3 + log(c) * clamp(b, 0, 1) + sum(a)")
    base = {n: torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64) for n in "abc"}
    base["c"] = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    out, branches, moving, _ = target.traced_around(base)
    want_out, want_branches = target.traced(base)
    assert torch.equal(out, want_out) and len(branches) == len(target.branch_sites) == 2
    assert all(torch.equal(x, y) for x, y in zip(branches, want_branches, strict=True))

    calls = []
    log = ops_module.OPS["log"]
    monkeypatch.setitem(ops_module.OPS, "log", dataclasses.replace(
        log, torch=lambda *a: calls.append(1) or torch.log(*a)))
    moved = {**base, "a": base["a"] + torch.tensor([0.1, 0.2, -2.0], dtype=torch.float64)}
    got, got_branches = moving("a")(moved)
    assert calls == []  # log(c) does not depend on a: reused, not recomputed
    want, want_b = target.traced(moved)
    assert len(calls) == 1
    assert torch.equal(got, want)
    assert all(torch.equal(x, y) for x, y in zip(got_branches, want_b, strict=True))
    assert not torch.equal(got_branches[0], branches[0])  # abs(a) changed sign at element 2
