"""Parsing is linear in the expression: a call bound against a second row of the op table
(max → maximum, where with a mask, x.max(y)) reuses its arguments' parse."""

from __future__ import annotations

import pytest

from gradscope.expr import parse as parsing


@pytest.mark.parametrize("form", ["max(E, y)", "where(m, E, y)", "x.max(E)", "E.max(y)",
                                  "max(E, dim=0).values"])
def test_nested_rebinding_parses_each_node_once(monkeypatch, form):
    calls = []
    original = parsing._Builder._node

    def counted(self, node, allow_compare):
        calls.append(node)
        return original(self, node, allow_compare)

    monkeypatch.setattr(parsing._Builder, "_node", counted)
    text = "x"
    for _ in range(22):
        text = form.replace("E", text)
    parsing.parse(text)
    # (once per node, or twice: with and without a comparison allowed)
    assert len(calls) <= 2 * len({id(n) for n in calls}) and len(calls) < 10 * len(text)
