"""GraphReport → an SVG picture of the backward graph: the output's node at the top, the inputs
at the bottom, every grad_fn node a box in the layer of its longest path from the output, the
nodes that stop or corrupt the gradient drawn in colour. Written as plain SVG text, so it needs
no Graphviz binary and no plotting library: any browser or image viewer opens it."""

from __future__ import annotations

from collections import defaultdict
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from gradscope.render.cells import printable, xml_safe

CHAR_W, LINE_H, PAD, GAP_X, GAP_Y = 7.6, 15, 8, 28, 46
COLOUR = {"vanishing": "#d62728", "saturating": "#ff7f0e", "nan": "#9467bd"}
WORD = {"vanishing": "VANISHING", "saturating": "SATURATING", "nan": "NaN/inf"}


def _lines(node: Any) -> list[str]:
    if node.leaf:
        return [printable(node.leaf), "input"]
    lines = [node.name]
    if node.module is not None:
        lines.append(printable(node.module or "top level"))
    if node.where:
        lines.append(printable(node.where))
    if node.status:
        lines.append(WORD[node.status])
    return lines


def _layers(report: Any) -> list[list[int]]:
    """Node ids by depth (longest path from the root), each layer ordered by its parents'
    mean position so that edges cross little."""
    by_id = {n.id: n for n in report.nodes}
    depth = {report.root: 0}
    order = [report.root]  # a topological order: a node after every parent
    indegree: dict[int, int] = defaultdict(int)
    for n in report.nodes:
        for c in n.children:
            indegree[c] += 1
    ready = [report.root]
    while ready:
        nid = ready.pop()
        for c in by_id[nid].children:
            depth[c] = max(depth.get(c, 0), depth[nid] + 1)
            indegree[c] -= 1
            if indegree[c] == 0:
                ready.append(c)
                order.append(c)
    layers: list[list[int]] = [[] for _ in range(max(depth.values()) + 1)]
    parents: dict[int, list[int]] = defaultdict(list)
    for nid in order:
        for c in by_id[nid].children:
            parents[c].append(nid)
    place: dict[int, float] = {}
    for nid in order:
        layers[depth[nid]].append(nid)
    for layer in layers:
        layer.sort(key=lambda i: sum(place.get(p, 0) for p in parents[i])
                   / max(1, len(parents[i])))
        place.update({nid: k for k, nid in enumerate(layer)})
    return layers


def svg(report: Any) -> str:
    """The picture as SVG text."""
    title = f"backward graph of {printable(report.target)}"
    if report.root is None:
        return _document(460, 60, [_text(10, 24, title, bold=True),
                                   _text(10, 46, "the output has no grad_fn: nothing flows back")])
    by_id = {n.id: n for n in report.nodes}
    lines = {nid: _lines(n) for nid, n in by_id.items()}
    size = {nid: (max(len(t) for t in ls) * CHAR_W + 2 * PAD, len(ls) * LINE_H + PAD)
            for nid, ls in lines.items()}
    layers = _layers(report)
    widths = [sum(size[i][0] for i in layer) + GAP_X * (len(layer) - 1) for layer in layers]
    width = max(max(widths), len(title) * CHAR_W) + 2 * GAP_X
    box: dict[int, tuple[float, float, float, float]] = {}
    y = 44.0
    for layer, row_width in zip(layers, widths, strict=True):
        x = (width - row_width) / 2
        tallest = max(size[i][1] for i in layer)
        for nid in layer:
            w, h = size[nid]
            box[nid] = (x, y, w, h)
            x += w + GAP_X
        y += tallest + GAP_Y
    parts = [_text(GAP_X, 24, title, bold=True)]
    for n in report.nodes:
        for c in n.children:
            if n.id in box and c in box:
                parts.append(_edge(box[n.id], box[c]))
    parts.extend(_node(by_id[nid], box[nid]) for nid in box)
    return _document(width, y - GAP_Y + 20, parts)


def _node(node: Any, where: tuple[float, float, float, float]) -> str:
    x, y, w, h = where
    colour = COLOUR.get(node.status, "#333333")
    rounded = h / 2 if node.leaf else 3.0  # inputs as pills, grad_fn nodes as boxes
    fill = "#eef5ff" if node.leaf else "#fdecec" if node.status else "#ffffff"
    stroke = 2.5 if node.status else 1
    out = [f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" '
           f'rx="{rounded:.1f}" fill="{fill}" stroke="{colour}" stroke-width="{stroke}"/>']
    for k, line in enumerate(_lines(node)):
        out.append(_text(x + w / 2, y + PAD / 2 + LINE_H * (k + 0.8), line, bold=k == 0,
                         anchor="middle", colour=colour if node.status and k else "#222222"))
    return "\n".join(out)


def _edge(parent: tuple[float, float, float, float],
          child: tuple[float, float, float, float]) -> str:
    x1, y1 = parent[0] + parent[2] / 2, parent[1] + parent[3]
    x2, y2 = child[0] + child[2] / 2, child[1]
    bend = (y2 - y1) / 2  # a vertical S-curve: leaves downwards, arrives from above
    return (f'<path d="M {x1:.1f} {y1:.1f} C {x1:.1f} {y1 + bend:.1f} {x2:.1f} {y2 - bend:.1f} '
            f'{x2:.1f} {y2:.1f}" fill="none" stroke="#777777" stroke-width="1.2" '
            'marker-end="url(#arrow)"/>')


def _text(x: float, y: float, text: str, bold: bool = False, anchor: str = "start",
          colour: str = "#222222") -> str:
    weight = ' font-weight="bold"' if bold else ""
    return (f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" fill="{colour}"{weight}>'
            f"{escape(xml_safe(printable(text)))}</text>")


def _document(width: float, height: float, parts: list[str]) -> str:
    head = (f'<?xml version="1.0" encoding="UTF-8"?>\n<svg xmlns="http://www.w3.org/2000/svg" '
            f'width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" '
            f'font-family="Helvetica, Arial, sans-serif" font-size="12">\n'
            f"<title>{escape('gradscope backward graph')}</title>\n"
            '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
            'markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" '
            f'fill="#777777"/></marker></defs>\n<rect width="100%" height="100%" '
            f"fill={quoteattr('white')}/>\n")
    return head + "\n".join(parts) + "\n</svg>\n"
