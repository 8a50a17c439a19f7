"""Reports → text and terminal output, one module per format (table.py for the terminal,
markdown.py, json.py; graph.py and suite.py for the other commands' reports). Renderers read
report objects and import nothing of gradscope but `report`; nothing in `report` imports them
back except `Report.to_json/to_markdown/to_text`, the contract's conveniences.

`show` and `text` are the one output path of every command: what kind of report an object is
comes from its `schema`.
"""

from __future__ import annotations

from typing import Any

FORMATS = ("table", "json", "markdown")
_REPORT, _GRAPH, _SWEEP, _RUN = ("gradscope.report/1", "gradscope.graph/1", "gradscope.sweep/1",
                                 "gradscope.run/1")


def show(obj: Any, console: Any) -> None:
    """Print `obj` with rich (tables, trees, plots) on `console`."""
    if obj.schema == _REPORT:
        from gradscope.render.table import render

        render(obj, console)
    elif obj.schema == _GRAPH:
        from gradscope.render.graph import tree

        console.print(tree(obj))
    elif obj.schema == _SWEEP:
        from gradscope.render.graph import sweep_plot

        console.print(sweep_plot(obj))
    else:
        from gradscope.render.suite import show as show_suite

        show_suite(obj, console)


def text(obj: Any, fmt: str, width: int = 120) -> str:
    """`obj` as one document in `fmt` (graph and sweep have no markdown form: plain text)."""
    if fmt == "json":
        from gradscope.render.json import dumps

        return dumps(obj) + "\n"
    if fmt == "markdown" and obj.schema == _REPORT:
        from gradscope.render.markdown import render

        return render(obj)
    if fmt == "markdown" and obj.schema == _RUN:
        from gradscope.render.suite import markdown

        return markdown(obj)
    from gradscope.render.console import record

    drawn = record(lambda console: show(obj, console), width)
    if fmt == "markdown":  # graph and sweep: a heading and their text in a fenced block
        from gradscope.render.cells import fence, md_code

        kind = "graph" if obj.schema == _GRAPH else "sweep"
        marks = fence(drawn)
        return f"## gradscope {kind}: `{md_code(obj.target)}`\n\n{marks}\n{drawn}\n{marks}\n"
    return drawn.rstrip("\n") + "\n"


def is_rich(obj: Any, fmt: str) -> bool:
    """Whether `fmt` is shown with rich on a terminal rather than written as a document."""
    return fmt == "table"
