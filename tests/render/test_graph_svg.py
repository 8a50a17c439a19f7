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


# ------------------------------------------------------------------ geometry
def _boxes(root: ET.Element) -> dict[int, tuple[float, float, float, float]]:
    return {int(r.get("data-node")): tuple(float(r.get(k)) for k in ("x", "y", "width", "height"))
            for r in root.iter(f"{NS}rect") if r.get("data-node") is not None}


def _points(d: str, samples: int = 40) -> list[tuple[float, float]]:
    """Points along an SVG path of M, L and C commands (the ones graph_svg writes)."""
    tokens = re.findall(r"[MLC]|-?\d+(?:\.\d+)?", d)
    out: list[tuple[float, float]] = []
    here = (0.0, 0.0)
    k = 0
    while k < len(tokens):
        op = tokens[k]
        if op in ("M", "L"):
            to = (float(tokens[k + 1]), float(tokens[k + 2]))
            if op == "L":
                out += [(here[0] + (to[0] - here[0]) * t / samples,
                         here[1] + (to[1] - here[1]) * t / samples) for t in range(samples + 1)]
            here, k = to, k + 3
        else:
            c1, c2, to = ((float(tokens[k + i]), float(tokens[k + i + 1])) for i in (1, 3, 5))
            for t in (i / samples for i in range(samples + 1)):
                u = 1 - t
                corners = zip(here, c1, c2, to, strict=True)
                out.append(tuple(u ** 3 * p0 + 3 * u * u * t * p1 + 3 * u * t * t * p2
                                 + t ** 3 * p3 for p0, p1, p2, p3 in corners))
            here, k = to, k + 7
    return out


def _crossings(report) -> list[str]:
    """Edges drawn through a box they do not connect (each path sampled densely)."""
    root = ET.fromstring(svg(report))
    boxes = _boxes(root)
    assert sorted(boxes) == sorted(n.id for n in report.nodes)  # every node drawn, by its id
    drawn = {p.get("data-edge") for p in root.iter(f"{NS}path") if p.get("data-edge")}
    assert drawn == {f"{n.id}-{c}" for n in report.nodes for c in n.children}  # the data's edges
    bad = []
    for path in root.iter(f"{NS}path"):
        pair = path.get("data-edge")
        if not pair:
            continue
        ends = {int(v) for v in pair.split("-")}
        for nid, (x, y, w, h) in boxes.items():
            if nid in ends:
                continue
            if any(x + 1 < px < x + w - 1 and y + 1 < py < y + h - 1
                   for px, py in _points(path.get("d"))):
                bad.append(f"{pair} through {nid}")
    return bad


def test_no_edge_crosses_a_box_it_does_not_connect():
    # the clamp→x edge passes the layer of round: before, it was drawn through RoundBackward0
    assert _crossings(_graph("sum(round(x) * 2 + clamp(x, 0, 1))")) == []
    assert _crossings(_graph("sum(sin(x) * exp(x) + x * x * tanh(x) + log(x * x + 1))")) == []
    assert _crossings(_graph("sum(x + sin(cos(tanh(exp(x)))) * x)")) == []


def test_a_residual_models_edges_go_around_its_boxes():
    from tests.paths import DATA

    report = gradscope.graph(f"{DATA}/models.py:dead_loss", shape={"x": (4, 8)})
    assert _crossings(report) == []


def test_the_picture_shrinks_to_a_notebook_cell():
    root = ET.fromstring(svg(_graph("sum(round(x) * 2 + clamp(x, 0, 1))")))
    assert "max-width:100%" in root.get("style") and root.get("viewBox")
    # a monospaced face whose advance (0.6 em at 12 px) the boxes are sized for
    assert "monospace" in root.get("font-family")


def test_the_notebook_wrapper_scales_to_its_container_and_keeps_its_ids_apart():
    report = _graph("sum(round(x) * 2 + clamp(x, 0, 1))")
    drawn = ET.fromstring(svg(report))
    first, second = report._repr_html_(), report._repr_html_()
    assert first.startswith("<div") and "<?xml" not in first
    root = ET.fromstring(first).find(f"{NS}svg")
    assert root.get("width") == "100%" and root.get("height") is None  # the container's width
    assert root.get("viewBox") == drawn.get("viewBox")  # its shape kept: the height follows
    assert f"max-width:{drawn.get('width')}px" in root.get("style")  # never drawn larger
    ids = [set(re.findall(r' id="([^"]+)"', html)) for html in (first, second)]
    assert ids[0] and not ids[0] & ids[1]  # two graphs in one notebook share no marker
    for html, own in zip((first, second), ids, strict=True):
        used = set(re.findall(r'url\(#([^)]+)\)', html))
        assert used and used <= own


def test_each_node_carries_the_gradient_figures_the_text_tree_shows():
    report = _graph("sum(clamp(x, 0, 1) * 3)")
    texts = _texts(ET.fromstring(svg(report)))
    clamp = next(n for n in report.nodes if n.name.startswith("Clamp"))
    got, passed = clamp.received, clamp.passed[0]
    assert f"in  ‖{got['norm']:.3g}‖ {got['nonzero']}/{got['numel']}≠0" in texts
    assert f"out ‖{passed['norm']:.3g}‖ {passed['nonzero']}/{passed['numel']}≠0" in texts
    assert passed["nonzero"] == 1 and got["nonzero"] == 3  # 0.3 inside (0, 1) only


def test_a_long_source_line_is_said_once_under_the_graph():
    from tests.paths import DATA

    report = gradscope.graph(f"{DATA}/models.py:loss")
    texts = _texts(ET.fromstring(svg(report)))
    places = {n.where.split(": ", 1)[0] for n in report.nodes if ": " in n.where}
    assert places  # the model's nodes name where in models.py they were made
    for place in places:
        assert place in texts  # each node box: the place alone
        assert sum(t.startswith(place + ":  ") for t in texts) == 1  # its line: once
    assert not any(": " in t and t.split(": ", 1)[0] in places and not t.startswith(
        tuple(p + ":  " for p in places)) for t in texts)
