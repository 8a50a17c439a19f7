"""Reports → text and terminal output, one module per format (table.py for the terminal,
markdown.py, json.py; graph.py and suite.py for the other commands' reports). Renderers read
report objects and import nothing of gradscope but `report`; nothing in `report` imports them
back except `Report.to_json/to_markdown/to_text`, the contract's conveniences.

`show` and `text` are the one output path of every command: what kind of report an object is
comes from its `schema` (report/kinds.py); the formats are `FORMATS`, each saying which kinds
it writes — asked for another, `text` refuses (a usage error, exit 2), never a crash.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from gradscope.errors import UsageError
from gradscope.report import kinds


def show(obj: Any, console: Any) -> None:
    """Print `obj` with rich (tables, trees, plots) on `console`."""
    if obj.schema == kinds.CHECK:
        from gradscope.render.table import render

        render(obj, console)
    elif obj.schema == kinds.GRAPH:
        from gradscope.render.graph import tree

        console.print(tree(obj))
    elif obj.schema == kinds.SWEEP:
        from gradscope.render.graph import sweep_plot

        console.print(sweep_plot(obj))
    else:
        from gradscope.render.suite import show as show_suite

        show_suite(obj, console)


def renderables(report: Any) -> Any:
    """A report's tables, panels and lines, for rich to lay out."""
    from gradscope.render.table import renderables as of_report

    return of_report(report)


def segments(report: Any, options: Any) -> Any:
    """A report drawn for another console's `options` (`rich.print(report)`): by a console
    of gradscope's, so that the caller's markup never reads the report's user text."""
    from rich.console import Group

    from gradscope.render.console import safe_render

    return safe_render(Group(*renderables(report)), options)


def html(report: Any, width: int = 120) -> str:
    """A report as coloured HTML (a notebook's display), with the gradient-flow picture under
    it where the report is a model's (its tensors' gradients, the chart `--plot` draws)."""
    from gradscope.render.console import html as recorded
    from gradscope.render.flow import flowing
    from gradscope.render.table import render

    page = recorded(lambda console: render(report, console), width)
    if not report.model or len(flowing(report)) < 2:
        return page
    return page + flow_picture(report)._repr_html_()


def flow_picture(report: Any) -> Any:
    """`Report.plot()`: the gradient flow as a Picture (SVG; PNG through matplotlib)."""
    from gradscope.render.flow import save_flow_plot
    from gradscope.render.pictures import Picture, flow_svg

    return Picture(flow_svg(report), "gradient flow", png=lambda p: save_flow_plot(report, p))


def sweep_picture(report: Any) -> Any:
    """The sweep's three panels and its sentences as a Picture."""
    from gradscope.render.graph import save_plot
    from gradscope.render.pictures import Picture, sweep_svg

    return Picture(sweep_svg(report), "sweep", png=lambda p: save_plot(report, p))


def graph_picture(report: Any) -> Any:
    """The backward graph as a Picture (SVG only: it is drawn without a plotting library)."""
    from gradscope.render.graph_svg import svg
    from gradscope.render.pictures import Picture

    return Picture(svg(report), "backward graph")


def _table(obj: Any, width: int) -> str:
    """What a terminal shows, as plain text (no colour, no padding)."""
    from gradscope.render.console import record

    return record(lambda console: show(obj, console), width).rstrip("\n") + "\n"


def _json(obj: Any, width: int) -> str:
    from gradscope.render.json import dumps

    return dumps(obj) + "\n"


def _json_to(obj: Any, out: TextIO) -> None:
    from gradscope.render.json import write as json_write

    json_write(obj, out)
    out.write("\n")


def _markdown(obj: Any, width: int) -> str:
    """A check's or a suite's own markdown; graph and sweep: a heading and their text in a
    fenced block."""
    if obj.schema == kinds.CHECK:
        from gradscope.render.markdown import render

        return render(obj)
    if obj.schema == kinds.RUN:
        from gradscope.render.suite import markdown

        return markdown(obj)
    from gradscope.render.cells import fence, md_code

    drawn = _table(obj, width)
    kind = "graph" if obj.schema == kinds.GRAPH else "sweep"
    marks = fence(drawn)
    return f"## gradscope {kind}: `{md_code(obj.target)}`\n\n{marks}\n{drawn}{marks}\n"


@dataclass(frozen=True)
class Format:
    """An output format: how a report object becomes one document (`write(obj, width)`),
    whether a terminal shows it with rich instead (colour, boxes), and the kinds of report it
    writes (their schemas: report/kinds.py)."""

    write: Callable[[Any, int], str]
    rich: bool = False
    kinds: frozenset[str] = kinds.EVERY
    # the document written to a stream a piece at a time (a --full report of millions of
    # elements is never one string); None: `write`'s text, written whole
    stream: Callable[[Any, TextIO], None] | None = None


# The formats `--format` offers (its choices are generated from here), in order. A new format
# is a renderer module and one line here.
FORMATS: dict[str, Format] = {
    "table": Format(_table, rich=True),
    "json": Format(_json, stream=_json_to),
    "markdown": Format(_markdown),
}


def text(obj: Any, fmt: str, width: int = 120) -> str:
    """`obj` as one document in `fmt` (refused where `fmt` does not write its kind)."""
    return writer(obj, fmt).write(obj, width)


def write(obj: Any, fmt: str, out: TextIO, width: int = 120) -> None:
    """`obj` as one document in `fmt`, written to `out` (streamed where the format can)."""
    found = writer(obj, fmt)
    if found.stream is not None:
        found.stream(obj, out)
    else:
        out.write(found.write(obj, width))


def writer(obj: Any, fmt: str) -> Format:
    """The format `fmt`, where it writes `obj`'s kind of report."""
    found = FORMATS.get(fmt)
    if found is None:
        raise UsageError(f"--format {fmt!r} is not a format; formats are: {', '.join(FORMATS)}")
    if getattr(obj, "schema", None) not in found.kinds:
        able = [name for name, f in FORMATS.items() if getattr(obj, "schema", None) in f.kinds]
        raise UsageError(f"--format {fmt} writes {_kinds(found.kinds)} reports, not a "
                         f"{kinds.name_of(obj)} report; formats for it: {', '.join(able)}")
    return found


def _kinds(schemas: frozenset[str]) -> str:
    return ", ".join(sorted(kinds.NAMES.get(s, s) for s in schemas))


def is_rich(obj: Any, fmt: str) -> bool:
    """Whether `fmt` is shown with rich on a terminal rather than written as a document."""
    return writer(obj, fmt).rich
