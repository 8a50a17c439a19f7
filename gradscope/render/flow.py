"""Gradient flow as a picture: per tensor, in the order the forward used it, the mean and the
largest |gradient| on a log scale — the plot people draw by hand (the PyTorch forum's
`plot_grad_flow`, TensorBoard's histograms) to see where gradients vanish or explode — with
the tensors whose check failed marked. A bar chart in the terminal; PNG or SVG through
matplotlib (the optional extra `plot`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from rich import box
from rich.table import Table
from rich.text import Text

from gradscope import escape
from gradscope.render.cells import fmt, printable, style
from gradscope.report.model import InputReport, Report
from gradscope.report.modules import forward_sorted

BAR = 40  # characters of the widest terminal bar
DECADES = 8  # orders of magnitude a bar spans below the largest gradient


def flowing(report: Report) -> list[InputReport]:
    """The tensors with gradient numbers, in forward order."""
    return [i for i in forward_sorted(report.inputs, report.forward_order)
            if i.grad_max_abs is not None]


def _length(value: float, top: float) -> int:
    """A bar's length: log10 of `value` over the DECADES below `top`."""
    if value <= 0 or top <= 0:
        return 0
    span = math.log10(value / top) + DECADES
    return max(0, min(BAR, round(BAR * span / DECADES)))


def flow_chart(report: Report) -> Table:
    """The terminal bar chart: ▇ up to the mean |grad|, ░ on to the largest."""
    rows = flowing(report)
    top = max((i.grad_max_abs or 0.0 for i in rows), default=0.0)
    table = Table(title=Text("gradient flow · mean ▇ and max ░ |grad| per tensor, forward "
                             f"order, log scale ({DECADES} decades)", style="bold"),
                  title_justify="left", box=box.SIMPLE_HEAD)
    for column, justify in (("tensor", "left"), ("mean |grad|", "right"),
                            ("max |grad|", "right"), ("", "left"), ("status", "left")):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for item in rows:
        mean = _length(item.grad_mean_abs or 0.0, top)
        peak = _length(item.grad_max_abs or 0.0, top)
        bar = Text("▇" * mean, style="red" if item.status.fails else "cyan")
        bar.append("░" * max(peak - mean, 0), style="dim")
        table.add_row(Text(printable(item.name)), fmt(item.grad_mean_abs),
                      fmt(item.grad_max_abs), bar, Text(item.status, style=style(item.status)))
    if not rows:
        table.caption = "no tensor has a gradient to plot"
    return table


def plotter(path: Path) -> Any:
    """matplotlib's pyplot for writing `path`, or a UsageError saying why not (asked before a
    check runs, so that a missing extra costs nothing)."""
    from gradscope.errors import UsageError

    if path.suffix.lower() not in (".png", ".svg"):
        raise UsageError(f"--plot {path}: the file must end in .png or .svg (or give --plot - "
                         "for the chart in the terminal)")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("--plot FILE needs matplotlib (pip install matplotlib); --plot - "
                         "draws the chart in the terminal with nothing more") from None
    return plt


def save_flow_plot(report: Report, path: Path) -> None:
    """The same chart as PNG or SVG (matplotlib): bars of max and mean |grad| on a log axis,
    the failing tensors' names in red."""
    from gradscope.errors import UsageError

    plt = plotter(path)
    rows = flowing(report)
    if not rows:
        raise UsageError("--plot: no tensor has a gradient to plot")
    names = [escape.plot(i.name) for i in rows]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.35 * len(rows) + 2), 4.5))
    positions = range(len(rows))

    def height(value: float | None) -> float:  # a zero gradient draws no bar (log axis)
        return value if value else float("nan")

    ax.bar(positions, [height(i.grad_max_abs) for i in rows], color="lightsteelblue",
           label="max |grad|")
    ax.bar(positions, [height(i.grad_mean_abs) for i in rows], color="steelblue", width=0.5,
           label="mean |grad|")
    ax.set_yscale("log")
    smallest = min((v for i in rows for v in (i.grad_mean_abs, i.grad_max_abs) if v),
                   default=None)
    if smallest is not None:  # a decade below the smallest bar: every bar has a length
        ax.set_ylim(bottom=smallest / 10)
    for k, item in enumerate(rows):
        if not item.grad_max_abs:  # said in words where there is no bar to see
            ax.annotate("all zero", (k, 0), xycoords=("data", "axes fraction"),
                        xytext=(0, 4), textcoords="offset points", rotation=90, ha="center",
                        va="bottom", fontsize=8, color="firebrick")
    ax.set_xticks(list(positions), names, rotation=60, ha="right", fontsize=8)
    for label, item in zip(ax.get_xticklabels(), rows, strict=True):
        if item.status.fails:
            label.set_color("red")
    ax.set_ylabel("|gradient|")
    ax.set_title(f"gradscope gradient flow: {escape.plot(report.target)}" +
                 ("" if report.passed else " (failing tensors in red)"))
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
