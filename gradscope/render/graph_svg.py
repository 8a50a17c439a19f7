"""GraphReport → an SVG picture of the backward graph: the output's node at the top, the inputs
at the bottom, every grad_fn node a box in the layer of its longest path from the output, the
nodes that stop or corrupt the gradient drawn in colour. Written as plain SVG text, so it needs
no Graphviz binary and no plotting library: any browser or image viewer opens it."""

from __future__ import annotations

import re
from collections import defaultdict
from itertools import pairwise
from typing import Any
from xml.sax.saxutils import escape

from gradscope.render.cells import fmt, printable, xml_safe
from gradscope.render.pictures import document

CHAR_W, LINE_H, PAD, GAP_X, GAP_Y = 7.6, 15, 8, 28, 46
COLOUR = {"vanishing": "#d62728", "saturating": "#ff7f0e", "nan": "#9467bd", "wrong": "#d62728"}
WORD = {"vanishing": "VANISHING", "saturating": "SATURATING", "nan": "NaN/inf",
        "wrong": "WRONG BACKWARD"}


# 'file.py:12: y = f(x)' or 'Cell In[3], line 12: y = f(x)': where a node was made and the
# line that made it ('Cls.backward (file.py:8)', a custom Function's, has no line after it)
_SOURCED = re.compile(r"^(.*?(?::\d+|, line \d+)): (.*)$", re.S)
KEY = ("in / out: the gradient reaching a node and the one it passes on — ‖L2 norm‖ and "
       "nonzero/elements (≠0)")
CODE_CHARS = 110  # a source line in the legend is cut here (whole in its tooltip)


def split_where(where: str) -> tuple[str, str]:
    """(location, source line) of a node's `where`; the line '' where it carries none."""
    found = _SOURCED.match(where)
    return (found.group(1), found.group(2)) if found else (where, "")


def _flowed(stats: dict[str, Any] | None) -> str:
    if not stats:
        return "—"
    return f"‖{fmt(stats.get('norm'), 3)}‖ {stats['nonzero']}/{stats['numel']}≠0"


def _figures(node: Any) -> list[str]:
    """The gradient through the node, as the text tree says it: its norm and nonzero count
    coming in, and going out to each input of the node."""
    if node.leaf or not node.received:
        return []
    passed = [p for p in node.passed if p]
    return [f"in  {_flowed(node.received)}",
            "out " + (", ".join(_flowed(p) for p in passed[:3]) or "—")
            + (f", +{len(passed) - 3}" if len(passed) > 3 else "")]


FIGURES = ("in  ", "out ")


def _lines(node: Any) -> list[str]:
    if node.leaf:
        return [printable(node.leaf), "input"]
    lines = [node.name]
    if node.module is not None:
        lines.append(printable(node.module or "top level"))
    if node.where:  # the place only: its source line is said once, under the graph
        lines.append(printable(split_where(node.where)[0]))
    lines += _figures(node)
    if node.status:
        lines.append(WORD[node.status])
    return lines


def _legend(report: Any, y: float) -> tuple[list[str], float]:
    """Each source line the nodes name, once: 'place  line' under the graph."""
    said: dict[str, str] = {}
    for node in report.nodes:
        place, code = split_where(node.where) if node.where and not node.leaf else ("", "")
        if code and place not in said:
            said[place] = code
    parts = [_text(GAP_X, y + 14, KEY, colour="#555555")]
    if said:
        y += LINE_H * 1.5
        parts.append(_text(GAP_X, y + 14, "source lines", bold=True))
    for place, code in said.items():
        y += LINE_H
        shown = code if len(code) <= CODE_CHARS else code[:CODE_CHARS - 1] + "…"
        parts.append(f"<g><title>{escape(xml_safe(printable(code)))}</title>"
                     + _text(GAP_X, y + 14, f"{printable(place)}:  {printable(shown)}") + "</g>")
    return parts, y + LINE_H


DUMMY_W = 12.0  # the slot a long edge takes in a layer it passes through


def _depths(report: Any) -> tuple[dict[int, int], list[int]]:
    """Each node's layer (its longest path from the root) and a topological order."""
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
    return depth, order


def _layers(report: Any) -> tuple[list[list[Any]], dict[tuple[int, int], list[Any]]]:
    """Slots by layer — node ids, and for an edge that spans several layers one dummy slot
    (`("edge", parent, child, layer)`) in each layer it passes, so that it is drawn through a
    gap of its own and never through a box — each layer ordered by its parents' mean
    position so that edges cross little; and each edge's chain of slots."""
    by_id = {n.id: n for n in report.nodes}
    depth, order = _depths(report)
    layers: list[list[Any]] = [[] for _ in range(max(depth.values()) + 1)]
    parents: dict[Any, list[Any]] = defaultdict(list)
    chains: dict[tuple[int, int], list[Any]] = {}
    for nid in order:
        layers[depth[nid]].append(nid)
    for nid in order:
        for c in by_id[nid].children:
            if c not in depth:
                continue
            chain = [nid, *(("edge", nid, c, d) for d in range(depth[nid] + 1, depth[c])), c]
            chains[(nid, c)] = chain
            for above, below in pairwise(chain):
                parents[below].append(above)
                if isinstance(below, tuple):
                    layers[below[3]].append(below)
    place: dict[Any, float] = {}
    for layer in layers:
        layer.sort(key=lambda i: sum(place.get(p, 0) for p in parents[i])
                   / max(1, len(parents[i])))
        place.update({slot: k for k, slot in enumerate(layer)})
    return layers, chains


def svg(report: Any) -> str:
    """The picture as SVG text."""
    title = f"backward graph of {printable(report.target)}"
    if report.root is None:
        return _document(460, 60, [_text(10, 24, title, bold=True),
                                   _text(10, 46, "the output has no grad_fn: nothing flows back")])
    by_id = {n.id: n for n in report.nodes}
    layers, chains = _layers(report)
    size = {nid: (max(len(t) for t in ls) * CHAR_W + 2 * PAD, len(ls) * LINE_H + PAD)
            for nid, ls in ((nid, _lines(n)) for nid, n in by_id.items())}
    for layer in layers:
        size.update({slot: (DUMMY_W, 0.0) for slot in layer if isinstance(slot, tuple)})
    widths = [sum(size[i][0] for i in layer) + GAP_X * (len(layer) - 1) for layer in layers]
    width = max(max(widths), len(title) * CHAR_W, _legend_width(report)) + 2 * GAP_X
    box: dict[Any, tuple[float, float, float, float]] = {}
    bottom: dict[int, float] = {}  # each layer's lowest box edge: edges leave below it
    y = 44.0
    for k, (layer, row_width) in enumerate(zip(layers, widths, strict=True)):
        x = (width - row_width) / 2
        tallest = max(size[i][1] for i in layer)
        for slot in layer:
            w, h = size[slot]
            box[slot] = (x, y, w, h if not isinstance(slot, tuple) else tallest)
            x += w + GAP_X
        bottom[k] = y + tallest
        y += tallest + GAP_Y
    depth_of = {slot: k for k, layer in enumerate(layers) for slot in layer}
    parts = [_text(GAP_X, 24, title, bold=True)]
    parts += [_edge([box[s] for s in chain], [bottom[depth_of[s]] for s in chain], pair)
              for pair, chain in chains.items() if all(s in box for s in chain)]
    parts.extend(_node(by_id[nid], box[nid]) for nid in box if not isinstance(nid, tuple))
    legend, y = _legend(report, y - GAP_Y + 12)
    return _document(width, y + 12, parts + legend)


def _legend_width(report: Any) -> float:
    places = [split_where(n.where) for n in report.nodes if n.where and not n.leaf]
    return max([len(p) + 3 + min(len(c), CODE_CHARS) for p, c in places if c] + [len(KEY)]) \
        * CHAR_W


def _node(node: Any, where: tuple[float, float, float, float]) -> str:
    x, y, w, h = where
    colour = COLOUR.get(node.status, "#333333")
    rounded = h / 2 if node.leaf else 3.0  # inputs as pills, grad_fn nodes as boxes
    fill = "#eef5ff" if node.leaf else "#fdecec" if node.status else "#ffffff"
    stroke = 2.5 if node.status else 1
    tip = f"<title>{escape(xml_safe(printable(node.where)))}</title>" if node.where else ""
    out = [f'<g>{tip}<rect data-node="{node.id}" x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" '
           f'height="{h:.1f}" rx="{rounded:.1f}" fill="{fill}" stroke="{colour}" '
           f'stroke-width="{stroke}"/>']
    for k, line in enumerate(_lines(node)):
        out.append(_text(x + w / 2, y + PAD / 2 + LINE_H * (k + 0.8), line, bold=k == 0,
                         anchor="middle", colour=_tone(node, k, line, colour)))
    return "\n".join(out) + "</g>"


def _tone(node: Any, k: int, line: str, colour: str) -> str:
    """A line's colour: the figures grey, a marked node's words in its colour."""
    if line.startswith(FIGURES):
        return "#555555"
    return colour if node.status and k else "#222222"


def _edge(slots: list[tuple[float, float, float, float]], bottoms: list[float],
          pair: tuple[int, int]) -> str:
    """One edge down its chain of slots: from the parent's box straight down to its layer's
    lowest edge, an S-curve across each gap between layers (where no box is), and straight
    down through each layer it passes in its own slot, arriving at the child's top."""
    x, y = slots[0][0] + slots[0][2] / 2, slots[0][1] + slots[0][3]
    path = [f"M {x:.1f} {y:.1f}"]
    if bottoms[0] > y:
        path.append(f"L {x:.1f} {bottoms[0]:.1f}")
        y = bottoms[0]
    for k, (sx, sy, sw, _) in enumerate(slots[1:], 1):
        x2 = sx + sw / 2
        bend = (sy - y) / 2  # a vertical S-curve: leaves downwards, arrives from above
        path.append(f"C {x:.1f} {y + bend:.1f} {x2:.1f} {sy - bend:.1f} {x2:.1f} {sy:.1f}")
        x, y = x2, sy
        if k < len(slots) - 1:  # a layer passed through: straight down its own slot
            path.append(f"L {x:.1f} {bottoms[k]:.1f}")
            y = bottoms[k]
    return (f'<path data-edge="{pair[0]}-{pair[1]}" d="{" ".join(path)}" fill="none" '
            'stroke="#777777" stroke-width="1.2" marker-end="url(#arrow)"/>')


def _text(x: float, y: float, text: str, bold: bool = False, anchor: str = "start",
          colour: str = "#222222") -> str:
    weight = ' font-weight="bold"' if bold else ""
    return (f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" fill="{colour}"{weight}>'
            f"{escape(xml_safe(printable(text)))}</text>")


ARROW = ('<marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
         'markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" '
         'fill="#777777"/></marker>')


def _document(width: float, height: float, parts: list[str]) -> str:
    return document(width, height, parts, "gradscope backward graph",
                    font="DejaVu Sans Mono, Menlo, Consolas, monospace", defs=ARROW)
