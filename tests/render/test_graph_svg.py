"""The backward graph as an SVG picture: well-formed, every node drawn once with its label,
edges pointing down from the output to the inputs, the nodes that eat the gradient coloured."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import gradscope
from gradscope.options import Options, Request
from gradscope.render.graph_svg import COLOUR, svg

NS = "{http://www.w3.org/2000/svg}"


def _graph(expr: str, at: str = "x=-0.5,0.3,1.5"):
    name, values = at.split("=")
    return gradscope.api.graph(Request("check", expr, Options(at={name: values})))


def _texts(root: ET.Element) -> list[str]:
    return [t.text or "" for t in root.iter(f"{NS}text")]


def test_every_node_drawn_once_and_marked_nodes_coloured():
    report = _graph("sum(round(x) * 2 + clamp(x, 0, 1))")
    root = ET.fromstring(svg(report))
    texts = _texts(root)
    for node in report.nodes:
        assert texts.count(node.leaf or node.name) == 1
    assert "VANISHING" in texts and "SATURATING" in texts
    strokes = [r.get("stroke") for r in root.iter(f"{NS}rect") if r.get("stroke")]
    assert COLOUR["vanishing"] in strokes and COLOUR["saturating"] in strokes
    edges = sum(len(n.children) for n in report.nodes)
    assert len(list(root.iter(f"{NS}path"))) == edges + 1  # + the arrowhead's shape


def test_edges_point_down_from_the_output_to_the_inputs():
    root = ET.fromstring(svg(_graph("sum(sin(x) * x + exp(x) / (1 + x * x))")))
    curves = [p.get("d") for p in root.iter(f"{NS}path") if p.get("d", "").startswith("M ")]
    assert curves
    for d in curves:
        numbers = [float(v) for v in re.findall(r"-?\d+\.?\d*", d)]
        assert numbers[-1] > numbers[1]  # ends lower than it starts: a parent above its child


def test_a_correct_graph_has_no_colour_and_labels_are_escaped():
    report = _graph("sum(where(x < 1, sin(x), 2 * x))")
    text = svg(report)
    ET.fromstring(text)  # '<' in the label is escaped: still well-formed XML
    assert "x &lt; 1" in text
    assert not any(n.status for n in report.nodes)
    assert not any(c in text for c in COLOUR.values())


def test_no_grad_fn_is_said_in_the_picture():
    report = _graph("x * 0 + 1")
    report.root, report.nodes = None, []  # a constant output: nothing flows back
    assert "nothing flows back" in svg(report)


def test_a_notebook_shows_the_picture():
    report = _graph("sum(relu(x))")
    assert report._repr_svg_() == svg(report)
