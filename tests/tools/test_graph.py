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
    assert all(n.module is None for n in report.nodes)  # an expression has no modules


def test_a_models_nodes_carry_their_module():
    from tests.paths import DATA

    report = graph(Request("check", f"{DATA}/models.py:dead_loss", Options(shape={"x": (4, 8)})))
    relu = next(n for n in report.nodes if n.name == "ReluBackward0")
    assert relu.module == "dead.1" and relu.status == "vanishing"
    assert sorted(n.module for n in report.nodes if n.name == "AddmmBackward0") == [
        "dead.0", "dead.2"]
    assert all(n.module is None for n in report.nodes if n.leaf)
    assert "ReluBackward0\\ndead.1" in to_dot(report)  # DOT labels name it too


def test_the_graph_names_a_wrong_custom_backward_and_not_a_right_one():
    from tests.paths import DATA

    wrong = graph(Request("check", f"{DATA}/seed_layers.py:ClampGradient", Options()))
    assert [n.status for n in wrong.nodes if n.name == "ClampGradientBackward"] == ["wrong"]
    assert [d.kind for d in wrong.diagnostics].count("culprit") == 1
    right = graph(Request("check", f"{DATA}/seed_layers.py:RoundGradient", Options()))
    assert all(n.status != "wrong" for n in right.nodes)  # a surrogate: linear, flat forward
    assert not any(d.kind == "culprit" for d in right.diagnostics)
    plain = graph(Request("check", f"{DATA}/seed_layers.py:combo", Options(plain=True)))
    assert all(n.status != "wrong" for n in plain.nodes)  # --plain: no in-place check
