"""Pictures from Python: the sweep's three panels and a check's gradient flow as plain SVG text
(no plotting library needed), wrapped in a `Picture` that a notebook shows by itself, scaled to
the cell, and that saves to .svg (this text) or .png (through matplotlib, the optional extra
`plot`). The words drawn under the sweep are `graph.sweep_words`, from the same numbers."""

from __future__ import annotations

import itertools
import math
import re
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
    """An SVG picture: shown by a notebook (`_repr_html_`, scaled to the cell; `_repr_svg_`
    the drawing itself), saved with `save(path)`."""

    svg: str
    what: str  # "sweep", "gradient flow", "backward graph": for messages
    png: Callable[[Path], None] | None = None  # the matplotlib writer, where one exists

    def _repr_svg_(self) -> str:
        return self.svg

    def _repr_html_(self) -> str:
        """The picture in a notebook cell or an HTML page: as wide as its container and no
        wider than drawn (a fixed-size SVG image is clipped or scrolled in a narrow cell)."""
        return inline(self.svg)

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


_ROOT = re.compile(r'<svg [^>]*?width="([\d.]+)" height="[\d.]+"[^>]*>')
_IDS = itertools.count(1)


def inline(svg: str) -> str:
    """An SVG document as a block of HTML that scales to its container: no XML declaration,
    width 100% up to the drawn width, the height following (the viewBox keeps the shape),
    and its ids made unique to this block (two pictures in one page share no marker)."""
    body = svg.split("?>", 1)[1].lstrip() if svg.startswith("<?xml") else svg
    found = _ROOT.match(body)
    if found is None:  # not a document of ours: shown as it is
        return body
    drawn = found.group(1)
    root = re.sub(r'width="[\d.]+" height="[\d.]+"', 'width="100%"', found.group(0), count=1)
    body = body[:found.start()] + root + body[found.end():]
    body = body.replace('style="max-width:100%;height:auto"',
                        f'style="max-width:{drawn}px;height:auto;display:block"', 1)
    suffix = f"-gs{next(_IDS)}"

    def renamed(tag: re.Match[str]) -> str:  # markup only: text never holds a raw '<'
        text = re.sub(r' id="([^"]+)"', lambda m: f' id="{m.group(1)}{suffix}"', tag.group(0))
        return re.sub(r'"url\(#([^)"]+)\)"', lambda m: f'"url(#{m.group(1)}{suffix})"', text)

    body = re.sub(r"<[^<>]*>", renamed, body)
    return f'<div style="width:100%;max-width:100%;overflow:hidden">{body}</div>'


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
Line = tuple[Sequence[float], str, str]  # values, colour, dash pattern ("" solid)


def sweep_svg(report: Any) -> str:
    """f; autograd's and finite differences' derivatives on one shared scale (the question a
    sweep answers is whether they are the same curve); their difference; the jumps marked,
    the stretches where they part shaded, and the sweep's sentences under them."""
    from gradscope.render.graph import difference, sweep_words

    var = report.var
    parts = [label(10, 20, f"gradscope sweep of {report.target} over {var}", bold=True)]
    parted = [(p["from"], p["to"]) for p in getattr(report, "parted", [])]
    error = getattr(report, "fd_error", 0.0)
    error = error if math.isfinite(error) and error > 0 else 0.0
    apart = "autograd − finite differences" + (
        f"   (grey: ± the finite differences' own error, {fmt(error, 3)})" if error else "")
    # (title at a height, lines on one scale, jumps, parted stretches, height, error band)
    panels: list[tuple[Callable[[float], str], list[Line], Sequence[float],
                       list[tuple[float, float]], float, float]] = [
        (lambda y: label(LEFT, y, "f = vᵀ·output", bold=True, colour=COLOURS["f"]),
         [(report.f, COLOURS["f"], "")], [], [], PANEL_H, 0.0),
        (lambda y: _key(var, report.eps, y),
         [(report.autograd, COLOURS["autograd"], ""),
          (report.finite_difference, COLOURS["finite differences"], "6,4")],
         report.jumps, parted, PANEL_H, 0.0),
        (lambda y: label(LEFT, y, apart, bold=True, colour=DIFF),
         [(difference(report), DIFF, "")], report.jumps, parted, PANEL_H * 2 // 3, error)]
    top = 52.0
    for title, lines, marks, bands, height, band in panels:
        parts.append(title(top - 6))
        parts += _panel(report.x, lines, top, height, marks, bands, band)
        top += height + TOP_GAP
    parts += _ticks(report.x, top - TOP_GAP, var)
    y = top + 26
    for sentence, tone in sweep_words(report):
        colour = "#c0392b" if "red" in tone else "#b9770e" if "yellow" in tone else \
            "#555555" if tone == "dim" else "#1e8449"
        parts.append(label(10, y, sentence, colour=colour, size=11))
        y += 16
    return document(WIDTH, y + 4, parts, f"gradscope sweep of {report.target}")


DIFF = "#7b3294"  # the difference's colour: neither derivative's


def _key(var: str, eps: float, y: float) -> str:
    """The shared panel's title at height `y`: which line is which."""
    ag, fd = COLOURS["autograd"], COLOURS["finite differences"]
    return (f'<text x="{LEFT}" y="{y:.1f}" font-size="12" font-weight="bold">'
            f'<tspan fill="#222222">d/d{text_of(var)}: </tspan>'
            f'<tspan fill="{ag}">━ autograd</tspan><tspan fill="#222222">   </tspan>'
            f'<tspan fill="{fd}">╍ finite differences (step {eps:.3g})</tspan></text>')


def _ticks(xs: Sequence[float], bottom: float, var: str) -> list[str]:
    """The x axis under the last panel: five values and the variable's name."""
    right, x0, x1 = WIDTH - 14, xs[0], xs[-1]
    out = []
    for k in range(5):
        x = x0 + (x1 - x0) * k / 4
        px = LEFT + (right - LEFT) * k / 4
        out.append(f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{bottom:.1f}" y2="{bottom + 4:.1f}" '
                   'stroke="#999999"/>')
        out.append(label(px, bottom + 16, fmt(x, 4), size=10, colour="#555555",
                         anchor="start" if k == 0 else "end" if k == 4 else "middle"))
    out.append(label((LEFT + right) / 2, bottom + 30, f"{var} ({len(xs)} points)", size=11,
                     colour="#555555", anchor="middle"))
    return out


def _panel(xs: Sequence[float], lines: Sequence[Line], top: float, height: float,
           marks: Sequence[float], bands: Sequence[tuple[float, float]],
           error: float = 0.0) -> list[str]:
    """One panel, its lines on one scale; `marks`: the jumps (thin red lines), `bands`:
    where the derivatives part (shaded red, the stretches the sentences name), `error`: a
    grey band ±error about 0 (the difference quotient's own error)."""
    right = WIDTH - 14
    finite = [y for ys, _, _ in lines for y in ys if math.isfinite(y)] + (
        [-error, error] if error else [])
    lo, hi = (min(finite), max(finite)) if finite else (0.0, 1.0)
    if hi - lo < 1e-12:
        lo, hi = lo - 1, hi + 1
    x0, x1 = xs[0], xs[-1]

    def px(x: float) -> float:
        return LEFT + (x - x0) / (x1 - x0) * (right - LEFT)

    def py(y: float) -> float:
        return top + height - (y - lo) / (hi - lo) * height

    out = [f'<rect x="{LEFT}" y="{top:.1f}" width="{right - LEFT}" height="{height}" '
           'fill="none" stroke="#cccccc"/>',
           label(LEFT - 6, top + 10, fmt(hi, 3), anchor="end", size=10, colour="#555555"),
           label(LEFT - 6, top + height, fmt(lo, 3), anchor="end", size=10, colour="#555555")]
    step = (right - LEFT) / max(1, len(xs) - 1) / 2
    for a, b in bands:  # (half a step either side, inside the panel)
        x_a, x_b = max(LEFT, px(a) - step), min(right, px(b) + step)
        out.append(f'<rect x="{x_a:.1f}" y="{top:.1f}" width="{x_b - x_a:.1f}" '
                   f'height="{height}" fill="#d62728" fill-opacity="0.08"/>')
    if error:
        out.append(f'<rect x="{LEFT}" y="{py(error):.1f}" width="{right - LEFT}" '
                   f'height="{py(-error) - py(error):.1f}" fill="#888888" fill-opacity="0.15"/>')
    if lo <= 0 <= hi:
        out.append(f'<line x1="{LEFT}" x2="{right}" y1="{py(0):.1f}" y2="{py(0):.1f}" '
                   'stroke="#999999" stroke-dasharray="3,3"/>')
        if top + 14 < py(0) < top + height - 12:  # (not over the range's own labels)
            out.append(label(LEFT - 6, py(0) + 4, "0", anchor="end", size=10,
                             colour="#555555"))
    out += [f'<line x1="{px(m):.1f}" x2="{px(m):.1f}" y1="{top:.1f}" y2="{top + height:.1f}" '
            'stroke="#d62728" stroke-opacity="0.35"/>' for m in marks[:200]]
    for ys, colour, dash in lines:
        out += _line(xs, ys, colour, dash, px, py, len(lines) > 1)
    return out


def _line(xs: Sequence[float], ys: Sequence[float], colour: str, dash: str,
          px: Callable[[float], float], py: Callable[[float], float],
          under: bool = False) -> list[str]:
    """A line through consecutive finite points; a non-finite value breaks it (a gap)."""
    runs: list[list[str]] = [[]]
    for x, y in zip(xs, ys, strict=True):
        if math.isfinite(y):
            runs[-1].append(f"{px(x):.1f},{py(y):.1f}")
        elif runs[-1]:
            runs.append([])
    dashed = f' stroke-dasharray="{dash}"' if dash else ""
    # a thin dashed line over a wide solid one (`under`): both seen where they coincide
    width = "1.5" if dash else "2.8" if under else "1.6"
    out = []
    for run in runs:
        if len(run) > 1:
            out.append(f'<polyline points="{" ".join(run)}" fill="none" stroke="{colour}" '
                       f'stroke-width="{width}"{dashed}/>')
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
    bar_x, bar_w, row_h = name_w + 10, WIDTH - name_w - 230, 18
    columns = [(bar_x + bar_w + 70, "mean |grad|"), (bar_x + bar_w + 140, "max |grad|"),
               (bar_x + bar_w + 150, "status")]
    parts = [label(10, 20, f"gradscope gradient flow: {report.target}", bold=True),
             label(10, 38, "per tensor, in forward order: mean (dark bar) and max (light bar) "
                   f"|gradient|, log scale over {DECADES} decades below the largest",
                   size=11, colour="#555555")]
    parts += [label(x, 62, text, size=11, bold=True, colour="#555555",
                    anchor="start" if text == "status" else "end") for x, text in columns]
    y = 68.0
    for item in rows:
        failing = item.status.fails
        tone = "#c0392b" if failing else "#555555"
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
        for (x, _), text in zip(columns, (_magnitude(item.grad_mean_abs),
                                          _magnitude(item.grad_max_abs), str(item.status)),
                                strict=True):
            parts.append(label(x, y + 13, text, size=11, colour=tone,
                               anchor="start" if x == columns[-1][0] else "end"))
        y += row_h + 4
    parts += _decades(bar_x, bar_w, y + 2, top_value)
    return document(WIDTH, y + 30, parts, f"gradscope gradient flow of {report.target}")


def _magnitude(value: float | None) -> str:
    return fmt(abs(value) if value is not None else None, 3)  # (never "-0")


def _decades(x: float, width: float, y: float, top: float) -> list[str]:
    """The log axis under the bars: a tick every two decades, labelled with its value."""
    from gradscope.render.flow import DECADES

    out = [f'<line x1="{x}" x2="{x + width:.1f}" y1="{y:.1f}" y2="{y:.1f}" stroke="#999999"/>']
    for k in range(0, DECADES + 1, 2):
        px = x + (DECADES - k) / DECADES * width
        out.append(f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{y:.1f}" y2="{y + 4:.1f}" '
                   'stroke="#999999"/>')
        out.append(label(px, y + 16, fmt(top * 10.0 ** -k, 2), size=10, colour="#555555",
                         anchor="end" if k == 0 else "middle"))
    return out


def _log_length(value: float, top: float, decades: int) -> float:
    """A bar's length as a fraction: log10 of value over the decades below top."""
    if value <= 0 or top <= 0:
        return 0.0
    return max(0.0, min(1.0, (math.log10(value / top) + decades) / decades))
