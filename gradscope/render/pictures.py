"""Pictures from Python: the sweep's three panels and a check's gradient flow as plain SVG text
(no plotting library needed), wrapped in a `Picture` that a notebook shows by itself, scaled to
the cell, and that saves to .svg (this text) or .png (through matplotlib, the optional extra
`plot`). The words drawn under the sweep are `graph.sweep_words`, from the same numbers."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from gradscope import escape as safe
from gradscope.errors import UsageError
from gradscope.render.cells import fmt

WIDTH = 760  # the drawing's own width; a notebook scales it down to its cell (max-width)
PANEL_H, LEFT, TOP_GAP = 130, 70, 26
COLOURS = {"f": "#1f77b4", "autograd": "#2ca02c", "finite differences": "#ff7f0e"}


@dataclass(frozen=True)
class Picture:
    """An SVG picture: shown by a notebook (`_repr_svg_`), saved with `save(path)`."""

    svg: str
    what: str  # "sweep", "gradient flow", "backward graph": for messages
    png: Callable[[Path], None] | None = None  # the matplotlib writer, where one exists

    def _repr_svg_(self) -> str:
        return self.svg

    def save(self, path: str | Path) -> Path:
        """Write the picture: `.svg` is this text; `.png` needs matplotlib."""
        path = Path(path)
        suffix = path.suffix.lower()
        if suffix == ".svg":
            path.write_text(self.svg, encoding="utf-8")
        elif suffix == ".png" and self.png is not None:
            self.png(path)
        else:
            kinds = ".svg or .png" if self.png is not None else ".svg"
            raise UsageError(f"the {self.what} picture saves to a file ending in {kinds}, "
                             f"not {path.name!r}")
        return path


SANS = "Helvetica, Arial, DejaVu Sans, sans-serif"


def document(width: float, height: float, parts: Sequence[str], title: str, *,
             font: str = SANS, defs: str = "") -> str:
    """An SVG document whose width follows its container down (a notebook cell): it never
    draws past the right edge, it shrinks. `defs`: markers and the like its parts use."""
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<svg xmlns="http://www.w3.org/2000/svg" '
            f'width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" '
            f'style="max-width:100%;height:auto" font-family="{font}" font-size="12">\n'
            f"<title>{text_of(title)}</title>\n" + (f"<defs>{defs}</defs>\n" if defs else "")
            + '<rect width="100%" height="100%" fill="white"/>\n' + "\n".join(parts)
            + "\n</svg>\n")


def text_of(text: str) -> str:
    """User text as SVG character data."""
    return escape(safe.xml(safe.terminal(text)))


def label(x: float, y: float, text: str, *, size: int = 12, colour: str = "#222222",
          anchor: str = "start", bold: bool = False) -> str:
    weight = ' font-weight="bold"' if bold else ""
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" fill="{colour}" '
            f'text-anchor="{anchor}"{weight}>{text_of(text)}</text>')


# ------------------------------------------------------------------ the sweep
def sweep_svg(report: Any) -> str:
    """f, autograd's derivative and finite differences' over the swept range, one panel each,
    the jumps marked, and the sweep's sentences under them."""
    from gradscope.render.graph import sweep_words

    var = report.var
    panels = [("f", "f = vᵀ·output", report.f),
              ("autograd", f"autograd d/d{var}", report.autograd),
              ("finite differences", f"finite differences d/d{var} (step {report.eps:.3g})",
               report.finite_difference)]
    parts = [label(10, 20, f"gradscope sweep of {report.target} over {var}", bold=True)]
    top = 52.0
    parted = [(p["from"], p["to"]) for p in getattr(report, "parted", [])]
    for key, title, ys in panels:
        parts += _panel(report.x, ys, top, title, COLOURS[key],
                        report.jumps if key == "finite differences" else [],
                        parted if key != "f" else [])
        top += PANEL_H + TOP_GAP
    parts.append(label(LEFT, top - TOP_GAP + 14, f"{var}: {fmt(report.x[0], 4)} … "
                       f"{fmt(report.x[-1], 4)}, {len(report.x)} points", colour="#555555"))
    y = top + 8
    for sentence, tone in sweep_words(report):
        colour = "#c0392b" if "red" in tone else "#b9770e" if "yellow" in tone else "#1e8449"
        parts.append(label(10, y, sentence, colour=colour, size=11))
        y += 16
    return document(WIDTH, y + 4, parts, f"gradscope sweep of {report.target}")


def _panel(xs: Sequence[float], ys: Sequence[float], top: float, title: str, colour: str,
           marks: Sequence[float], bands: Sequence[tuple[float, float]]) -> list[str]:
    """One panel; `marks`: the jumps (thin red lines), `bands`: where the derivatives part
    (shaded red, the stretches the sentences under the picture name)."""
    right = WIDTH - 14
    finite = [y for y in ys if math.isfinite(y)]
    lo, hi = (min(finite), max(finite)) if finite else (0.0, 1.0)
    if hi - lo < 1e-12:
        lo, hi = lo - 1, hi + 1
    x0, x1 = xs[0], xs[-1]

    def px(x: float) -> float:
        return LEFT + (x - x0) / (x1 - x0) * (right - LEFT)

    def py(y: float) -> float:
        return top + PANEL_H - (y - lo) / (hi - lo) * PANEL_H

    out = [label(LEFT, top - 6, title, bold=True, colour=colour),
           f'<rect x="{LEFT}" y="{top:.1f}" width="{right - LEFT}" height="{PANEL_H}" '
           'fill="none" stroke="#cccccc"/>',
           label(LEFT - 6, top + 10, fmt(hi, 3), anchor="end", size=10, colour="#555555"),
           label(LEFT - 6, top + PANEL_H, fmt(lo, 3), anchor="end", size=10, colour="#555555")]
    step = (right - LEFT) / max(1, len(xs) - 1) / 2
    out += [f'<rect x="{px(a) - step:.1f}" y="{top:.1f}" width="{px(b) - px(a) + 2 * step:.1f}" '
            f'height="{PANEL_H}" fill="#d62728" fill-opacity="0.08"/>' for a, b in bands]
    if lo <= 0 <= hi:
        out.append(f'<line x1="{LEFT}" x2="{right}" y1="{py(0):.1f}" y2="{py(0):.1f}" '
                   'stroke="#999999" stroke-dasharray="3,3"/>')
    out += [f'<line x1="{px(m):.1f}" x2="{px(m):.1f}" y1="{top:.1f}" y2="{top + PANEL_H:.1f}" '
            'stroke="#d62728" stroke-opacity="0.35"/>' for m in marks[:200]]
    # a line through consecutive finite points; a non-finite value breaks it (drawn as a gap)
    runs: list[list[str]] = [[]]
    for x, y in zip(xs, ys, strict=True):
        if math.isfinite(y):
            runs[-1].append(f"{px(x):.1f},{py(y):.1f}")
        elif runs[-1]:
            runs.append([])
    for run in runs:
        if len(run) > 1:
            out.append(f'<polyline points="{" ".join(run)}" fill="none" stroke="{colour}" '
                       'stroke-width="1.4"/>')
        elif run:
            x, y = run[0].split(",")
            out.append(f'<circle cx="{x}" cy="{y}" r="1.6" fill="{colour}"/>')
    return out


# ------------------------------------------------------------------ gradient flow
def flow_svg(report: Any) -> str:
    """Per tensor, in forward order, bars of its mean and largest |gradient| on a log scale
    (DECADES below the largest), the failing tensors' names in red."""
    from gradscope.render.flow import DECADES, flowing

    rows = flowing(report)
    if not rows:
        raise UsageError("no tensor of this report has a gradient to plot")
    top_value = max(i.grad_max_abs or 0.0 for i in rows)
    name_w = min(260, 12 + 7 * max(len(safe.terminal(i.name)) for i in rows))
    bar_x, bar_w, row_h = name_w + 10, WIDTH - name_w - 150, 18
    parts = [label(10, 20, f"gradscope gradient flow: {report.target}", bold=True),
             label(10, 38, f"mean (dark) and max (light) |grad| per tensor, forward order, "
                   f"log scale over {DECADES} decades below {fmt(top_value, 3)}", size=11,
                   colour="#555555")]
    y = 52.0
    for item in rows:
        failing = item.status.fails
        parts.append(label(name_w, y + 13, item.name, anchor="end",
                           colour="#c0392b" if failing else "#222222"))
        if not item.grad_max_abs:  # said in words where there is no bar to see
            parts.append(label(bar_x + 4, y + 13, "all zero", size=11, colour="#c0392b"))
        for value, fill, height in ((item.grad_max_abs, "#b0c4de", row_h - 4),
                                    (item.grad_mean_abs, "#4682b4", row_h - 10)):
            length = _log_length(value or 0.0, top_value, DECADES) * bar_w
            offset = (row_h - height) / 2
            parts.append(f'<rect x="{bar_x}" y="{y + offset:.1f}" width="{length:.1f}" '
                         f'height="{height}" fill="{fill}"/>')
        parts.append(label(bar_x + bar_w + 8, y + 13, f"{fmt(item.grad_max_abs, 3)}  "
                           f"{item.status}", size=11,
                           colour="#c0392b" if failing else "#555555"))
        y += row_h + 4
    return document(WIDTH, y + 8, parts, f"gradscope gradient flow of {report.target}")


def _log_length(value: float, top: float, decades: int) -> float:
    """A bar's length as a fraction: log10 of value over the decades below top."""
    if value <= 0 or top <= 0:
        return 0.0
    return max(0.0, min(1.0, (math.log10(value / top) + decades) / decades))
