"""GraphReport → rich Tree and Graphviz DOT; SweepReport → a terminal plot (and PNG/SVG)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from rich.console import Group
from rich.text import Text
from rich.tree import Tree

from gradscope import escape
from gradscope.render.cells import fmt, printable

MARK = {"vanishing": ("VANISHING", "bold red"), "saturating": ("SATURATING", "bold yellow"),
        "nan": ("NaN/inf", "bold magenta"), "wrong": ("WRONG BACKWARD", "bold red")}


def _flow_text(stats: dict[str, Any] | None) -> str:
    if not stats:
        return "—"
    return f"{stats['nonzero']}/{stats['numel']} nonzero ‖{fmt(stats['norm'], 3)}‖"


def _label(node: Any) -> Text:
    if node.leaf:
        return Text.assemble((node.leaf, "bold cyan"), ("  input (AccumulateGrad)", "dim"))
    text = Text.assemble((node.name, "bold"))
    if node.module is not None:  # a model's node: the module it ran in first
        text.append(f"  {printable(node.module or 'top level')}", style="cyan")
    text.append(f"  {printable(node.where)}" if node.where else "")
    if node.shape is not None:
        text.append(f"  shape {tuple(node.shape)}", style="dim")
    passed = [p for p in node.passed if p]
    text.append(f"  grad in {_flow_text(node.received)} → out "
                + (", ".join(_flow_text(p) for p in passed) or "—"), style="dim")
    if node.status in MARK:
        word, style = MARK[node.status]
        if node.status == "saturating" and node.received and passed:
            blocked = node.received["nonzero"] - passed[0]["nonzero"]
            word = f"{word} {blocked}/{node.received['nonzero']}"
        text.append(f"  [{word}]", style=style)
    return text


def tree(report: Any) -> Group:
    by_id = {n.id: n for n in report.nodes}
    title = Text.assemble(("backward graph of ", "bold"), printable(report.target),
                          (f"  ({report.target_kind})", "dim"))
    if report.root is None:
        return Group(title, Text("the output has no grad_fn: nothing flows back"))
    root = Tree(_label(by_id[report.root]))
    shown: set[int] = {report.root}
    stack = [(root, by_id[report.root])]
    while stack:
        branch, node = stack.pop()
        for cid in node.children:
            child = by_id[cid]
            if cid in shown and not child.leaf:
                branch.add(Text(f"↑ {child.name} {child.where} (shown above)", style="dim"))
                continue
            shown.add(cid)
            stack.append((branch.add(_label(child)), child))
    marked = [n for n in report.nodes if n.status]
    legend = Text("no node stops or corrupts the gradient", style="green") if not marked else \
        Text(f"{len(marked)} node(s) marked: " + ", ".join(
            f"{n.name} {MARK[n.status][0].lower()}" for n in marked), style="yellow")
    wrong = [Text(f"{printable(d.message)}", style="bold red")
             for d in report.diagnostics if d.kind == "culprit"]
    return Group(title, root, *wrong, legend)


def _dot_escape(text: str) -> str:
    return printable(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def dot(report: Any) -> str:
    colour = {"vanishing": "red", "saturating": "orange", "nan": "purple", "wrong": "red"}
    lines = ["digraph gradscope {", '  rankdir="TB";',
             '  node [shape=box, fontname="Helvetica"];',
             f'  label="{_dot_escape("backward graph of " + report.target)}";']
    for n in report.nodes:
        if n.leaf:
            label = f"{_dot_escape(n.leaf)}\\n(input)"  # escaped once: \\n is DOT's newline
            lines.append(f'  n{n.id} [label="{label}", shape=ellipse];')
            continue
        parts = [n.name] + ([n.module or "top level"] if n.module is not None else []) + (
            [n.where] if n.where else [])
        if n.status:
            parts.append(MARK[n.status][0])
        label = "\\n".join(_dot_escape(p) for p in parts)
        style = f', color={colour[n.status]}, penwidth=2' if n.status else ""
        lines.append(f'  n{n.id} [label="{label}"{style}];')
    for n in report.nodes:
        for cid in n.children:
            lines.append(f"  n{n.id} -> n{cid};")
    lines.append("}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- sweep plots
Series = tuple[list[float], str, str]  # values, the character drawn, its style


def _panel(title: Text | str, xs: list[float], series: list[Series], width: int,
           height: int) -> Group:
    """One terminal panel; several series share its scale (a later one is drawn over an
    earlier one where both fall on one cell, which then shows '◆': they agree there)."""
    finite = [y for ys, _, _ in series for y in ys if math.isfinite(y)]
    lo, hi = (min(finite), max(finite)) if finite else (0.0, 1.0)
    if hi - lo < 1e-12:
        lo, hi = lo - 1, hi + 1
    grid: list[list[tuple[str, str]]] = [[(" ", "")] * width for _ in range(height)]
    for ys, char, style in series:
        for i, y in enumerate(ys):
            col = min(width - 1, int(i * (width - 1) / max(1, len(ys) - 1)))
            row = 0 if not math.isfinite(y) else \
                height - 1 - round((y - lo) / (hi - lo) * (height - 1))
            mark = "!" if not math.isfinite(y) else char
            seen = grid[row][col][0]
            grid[row][col] = ("◆", "bold") if seen not in (" ", mark, "!") and \
                len(series) > 1 else (mark, style)
    zero_row = height - 1 - round((0 - lo) / (hi - lo) * (height - 1)) if lo <= 0 <= hi else None
    lines = [Text(title, style="bold") if isinstance(title, str) else title]
    for r, row in enumerate(grid):
        label = fmt(hi, 3) if r == 0 else fmt(lo, 3) if r == height - 1 else ""
        line = Text(f"{label:>10} │", style="dim")
        for char, style in row:
            line.append("·" if char == " " and r == zero_row else char, style=style or None)
        lines.append(line)
    axis = f"{'':>10} └{'─' * width}"
    lines.append(Text(axis, style="dim"))
    lines.append(Text(f"{'':>11}{fmt(xs[0], 3):<{width // 2}}{fmt(xs[-1], 3):>{width // 2}}",
                      style="dim"))
    return Group(*lines)


def difference(report: Any) -> list[float]:
    """autograd − finite differences per point (NaN where either is not finite)."""
    return [a - d if math.isfinite(a) and math.isfinite(d) else math.nan
            for a, d in zip(report.autograd, report.finite_difference, strict=True)]


def sweep_plot(report: Any, width: int = 72, height: int = 8) -> Group:
    var = report.var
    parts = [Text.assemble(("sweep of ", "bold"), report.target, f"  over {var} ∈ "
                           f"[{fmt(report.x[0], 4)}, {fmt(report.x[-1], 4)}], "
                           f"{len(report.x)} points")]
    parts.append(_panel("f = vᵀ·output", report.x, [(report.f, "•", "cyan")], width, height))
    both = Text.assemble((f"d/d{var}, one scale: ", "bold"), ("• autograd", "green"), "  ",
                         (f"x finite differences (step {report.eps:.3g})", "yellow"),
                         ("  ◆ both", "bold"))
    parts.append(_panel(both, report.x, [(report.autograd, "•", "green"),
                                         (report.finite_difference, "x", "yellow")],
                        width, height))
    parts.append(_panel("autograd − finite differences", report.x,
                        [(difference(report), "•", "magenta")], width, height // 2 + 1))
    notes = [Text(line, style=tone) for line, tone in sweep_words(report)]
    return Group(*parts, *notes)


def held(report: Any) -> str:
    """Where the other inputs stayed while the swept one moved."""
    fixed = getattr(report, "fixed", {}) or {}
    if not fixed:
        return f"{report.var} is the target's only input"
    said = [f"{printable(name)} = {_value(value)}" for name, value in list(fixed.items())[:8]]
    more = f" and {len(fixed) - 8} more" if len(fixed) > 8 else ""
    drawn = [printable(n) for n in getattr(report, "drawn", []) if n in fixed]
    why = f" ({', '.join(drawn)} drawn by gradscope; choose with --at, at= in Python)" \
        if drawn else ""
    return f"the other inputs held at {', '.join(said)}{more} while {report.var} moves{why}"


def _value(value: Any) -> str:
    """A held value in a few characters: a number, a short list, or its shape."""
    if not isinstance(value, list):
        return fmt(value, 4) if isinstance(value, (int, float)) else printable(str(value))
    shape, level = [], value
    while isinstance(level, list):
        shape.append(len(level))
        level = level[0] if level else None
    if len(shape) == 1 and len(value) <= 4:
        return "[" + ", ".join(fmt(v, 4) for v in value) + "]"
    return f"a tensor of shape {tuple(shape)}"


MAX_STRETCHES = 4
COARSE = 0.01  # a difference quotient this far off (relative) shows in its panel


def _stretches(spans: list[list[float]]) -> str:
    shown = [f"[{fmt(a, 4)}, {fmt(b, 4)}]" if a != b else fmt(a, 4)
             for a, b in spans[:MAX_STRETCHES]]
    more = f" and {len(spans) - MAX_STRETCHES} more" if len(spans) > MAX_STRETCHES else ""
    return (", ".join(shown[:-1]) + " and " + shown[-1] if len(shown) > 1 else shown[0]) + more


def sweep_words(report: Any) -> list[tuple[str, str]]:
    """What the sweep's numbers say, each sentence with its style — computed from the same
    lists the panels draw (where the derivatives part, where each is zero, the spikes)."""
    var, n = report.var, len(report.x)
    out = [(held(report), "dim")]
    parted = getattr(report, "parted", [])
    for p in parted[:MAX_STRETCHES]:
        where = f"{var} ∈ [{fmt(p['from'], 4)}, {fmt(p['to'], 4)}]" if p["from"] != p["to"] \
            else f"{var} = {fmt(p['from'], 4)}"
        out.append((f"autograd and finite differences part on {where} ({p['points']} points): "
                    f"autograd ≈ {fmt(p['autograd'], 4)}, finite differences ≈ "
                    f"{fmt(p['finite_difference'], 4)}, up to {fmt(p['apart'], 4)} apart",
                    "bold red"))
    if len(parted) > MAX_STRETCHES:
        out.append((f"…and on {len(parted) - MAX_STRETCHES} more stretch(es)", "bold red"))
    zero = getattr(report, "zero", {})
    ag0, fd0 = zero.get("autograd", []), zero.get("finite_difference", [])
    if parted and (ag0 or fd0) and ag0 != fd0:
        said = [f"autograd is 0 on {_stretches(ag0)}" if ag0 else "autograd is nowhere 0",
                f"finite differences are 0 on {_stretches(fd0)}" if fd0
                else "finite differences are nowhere 0"]
        out.append(("; ".join(said), "yellow"))
    if report.vanishing:
        out.append((f"autograd's derivative is 0 at {report.vanishing}/{n} points while f "
                    "changes over the range: the gradient vanishes", "bold red"))
    if report.jumps:
        shown = ", ".join(fmt(x, 4) for x in report.jumps[:12])
        more = f" (+{len(report.jumps) - 12} more)" if len(report.jumps) > 12 else ""
        out.append((f"finite differences spike at {var} ≈ {shown}{more}: jumps or kinks of f",
                    "bold yellow"))
    if not parted and not report.vanishing:
        coarse = getattr(report, "fd_error", 0.0) > COARSE * getattr(report, "scale", 0.0)
        out.append(("autograd and finite differences follow each other over the range"
                    + (f", within the finite differences' own error at this spacing (up to "
                       f"{fmt(report.fd_error, 3)}; more --points makes it smaller)" if coarse
                       else "") + ("" if report.jumps else "; no jumps seen"), "green"))
    return out


def save_plot(report: Any, path: Path) -> None:
    """PNG or SVG through matplotlib (the optional extra `plot`)."""
    from gradscope.errors import UsageError

    if path.suffix.lower() not in (".png", ".svg"):
        raise UsageError(f"--plot {path}: the file must end in .png or .svg")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("--plot needs matplotlib (pip install matplotlib, or '.[plot]' from "
                         "gradscope's source); the terminal plot needs nothing") from None
    fig, axes = plt.subplots(3, 1, sharex=True, figsize=(8, 7),
                             gridspec_kw={"height_ratios": [3, 3, 2]})
    var = report.var
    axes[0].plot(report.x, report.f, color="tab:blue", linewidth=1.2)
    axes[0].set_ylabel("f = vᵀ·output")
    axes[1].plot(report.x, report.autograd, color="tab:green", linewidth=2.6, label="autograd")
    axes[1].plot(report.x, report.finite_difference, color="tab:orange", linewidth=1.3,
                 linestyle="--", label=f"finite differences (step {report.eps:.3g})")
    axes[1].set_ylabel(f"d/d{var}")
    axes[1].legend(loc="best", fontsize="small")
    axes[2].plot(report.x, difference(report), color="purple", linewidth=1.2)
    if report.fd_error > 0 and math.isfinite(report.fd_error):
        axes[2].axhspan(-report.fd_error, report.fd_error, color="grey", alpha=0.15,
                        label="± the finite differences' own error")
        axes[2].legend(loc="best", fontsize="small")
    axes[2].set_ylabel("autograd − FD")
    for ax in axes:
        ax.grid(alpha=0.3)
    for p in getattr(report, "parted", [])[:50]:
        for ax in axes[1:]:
            ax.axvspan(p["from"], p["to"], color="red", alpha=0.08)
    for x in report.jumps[:50]:
        axes[1].axvline(x, color="red", alpha=0.2, linewidth=0.8)
    fig.text(0.01, 0.005, escape.plot(held(report)), fontsize="small", color="grey")
    axes[-1].set_xlabel(var)
    fig.suptitle(f"gradscope sweep: {escape.plot(report.target)}")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path)
    plt.close(fig)
