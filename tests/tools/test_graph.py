"""`gradscope graph` as a library call: nodes, statuses, sources and DOT."""

from __future__ import annotations

from gradscope.options import Options, Request
from gradscope.render.graph import dot as to_dot
from gradscope.tools.graph import graph


def test_graph_marks_round_and_clamp():
    report = graph(Request("check", "sum(round(x) * 2 + clamp(x, 0, 1))",
                           Options(at={"x": "-0.5,0.3,1.5"})))
    names = {n.name: n for n in report.nodes}
    assert names["RoundBackward0"].status == "vanishing"
    assert names["ClampBackward0"].status == "saturating"
    assert names["RoundBackward0"].where == "round(x)"
    dot = to_dot(report)
    assert dot.startswith("digraph gradscope {") and "VANISHING" in dot and "SATURATING" in dot
    assert dot.count("->") == sum(len(n.children) for n in report.nodes)
