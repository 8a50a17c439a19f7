"""The backward graph as a tree and as Graphviz DOT, and a sweep's terminal plot: the nodes
that eat the gradient marked in words and colour."""

from __future__ import annotations

import gradscope
from gradscope import render
from gradscope.options import Options, Request
from gradscope.render.graph import dot


def _graph(expr: str):
    return gradscope.api.graph(Request("check", expr, Options(at={"x": "0.2,1.7"})))


def test_the_tree_marks_the_vanishing_node():
    text = render.text(_graph("sum(round(x) * 2)"), "table")
    assert "round(x)" in text and "VANISHING" in text


def test_dot_is_a_digraph_with_the_vanishing_node_coloured():
    out = dot(_graph("sum(round(x) * 2)"))
    assert out.startswith("digraph") and out.rstrip().endswith("}")
    assert "red" in out and "round(x)" in out
    assert dot(_graph("sum(round(x) * 2)")) == out  # the same graph twice: the same DOT


def test_a_sweeps_plot_shows_its_jumps():
    report = gradscope.api.sweep(Request("check", "round(x)", Options()), "x", -1.0, 1.0, 41)
    text = render.text(report, "table")
    assert report.jumps and "autograd" in text.lower()
