"""Report → rich renderables for the terminal: a header panel, one table per input (worst rows
first when large), the extra checks, the diagnostics and a verdict line.

Status is always spelled out in words; colour only repeats it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from rich import box
from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from gradscope.render.cells import (
    TABLE_ROWS,
    flat,
    fmt,
    index_of,
    index_text,
    printable,
    shape_text,
    style,
)
from gradscope.render.summary import (
    consolidated,
    detailed,
    header_rows,
    summary_table,
    where_wrong,
)
from gradscope.report.headline import headline, no_gradient
from gradscope.report.model import ForwardReport, InputReport, Report, TensorSummary
from gradscope.report.modules import grouped
from gradscope.report.status import Status


def _preview(summary: TensorSummary, limit: int = 6) -> str:
    values = flat(summary.values)
    more = summary.elements_reported == "head" or len(values) > limit
    shown = ", ".join(fmt(v) for v in values[:limit])
    if not isinstance(summary.values, list):
        return fmt(summary.values)
    return f"[{shown}{', …' if more else ''}]"


def header(report: Report) -> Panel:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    grid.add_row("target", Text.assemble(printable(report.target), "  ",
                                         (f"({report.target_kind})", "dim")))
    tol = report.tolerances
    grid.add_row("dtype", f"{report.dtype} on {report.device} · seed {report.seed} · "
                 f"rtol {tol.get('rtol', 0):g} · atol {tol.get('atol', 0):g} · "
                 f"eps {tol.get('eps', 0):g}")
    grid.add_row("output", f"shape {shape_text(report.output.shape)}  {_preview(report.output)}")
    if report.command != "jacobian":
        source = report.upstream_source
        if source == "ones":
            source = "ones, the default" if not report.upstream_undefined else \
                (f"the default: ones where the output is defined, 0 at its "
                 f"{report.upstream_undefined} NaN or infinite element(s)")
        grid.add_row("upstream", f"shape {shape_text(report.upstream.shape)}  "
                     f"{_preview(report.upstream)}  ({source})")
    if report.model:
        for label, value in header_rows(report):
            grid.add_row(Text(label), Text(value))
    else:
        for item in report.inputs:
            said = item.described or item.origin
            grid.add_row(Text(f"input {printable(item.name)}"),
                         Text(f"shape {shape_text(item.shape)} · {printable(said)}"))
    left_out = [n for n, c in report.constants.items() if c["origin"].startswith("not checked")]
    for name, held in report.constants.items():
        if name in left_out and len(left_out) > 3:
            continue
        grid.add_row(Text(f"const {printable(name)}"),
                     Text(f"shape {shape_text(held['shape'])} · {held['dtype']} · "
                          f"{printable(held['origin'])} (data: not differentiated)"))
    if len(left_out) > 3:
        grid.add_row(Text("not checked"), Text(f"{len(left_out)} tensors left out by --only/"
                                               f"--skip (e.g. {printable(left_out[0])})"))
    title = {"check": "gradscope check", "jvp": "gradscope jvp (vector-Jacobian product)",
             "jacobian": "gradscope jacobian"}.get(report.command, report.command)
    return Panel(grid, title=title, title_align="left", expand=False)


def _statuses(item: InputReport) -> list[str]:
    if item.element_status is None:  # nothing was compared (backward failed)
        n = max((len(flat(c.values)) for c in item.columns.values()), default=0)
        return [item.status] * (n or len(flat(item.values)))
    return flat(item.element_status)


def _total(item: InputReport) -> int:
    total = 1
    for s in (item.jacobian_shape or item.shape):
        total *= s
    return total


def input_table(item: InputReport) -> Table:
    positions = item.rows
    statuses = _statuses(item)
    columns = {k: flat(c.values) for k, c in item.columns.items()}
    errors = flat(item.error)
    shape = item.jacobian_shape or item.shape
    values = flat(item.values)
    jac_out = len(shape) - len(item.shape) if item.jacobian_shape else 0

    title = Text.assemble((item.name, "bold"), f" · {item.role} · shape {shape_text(item.shape)}")
    if item.jacobian_shape:
        title.append(f" · Jacobian {shape_text(item.jacobian_shape)}")
    if item.formula:
        title.append(" · VJP = ")
        title.append(item.formula, style="cyan")
    title.append(" · ")
    title.append(item.status, style=style(item.status))
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, expand=False)
    table.add_column("out ← in" if item.jacobian_shape else "index", style="dim")
    table.add_column("value", justify="right")
    for column in item.columns.values():
        table.add_column(column.label, justify="right")
    table.add_column("|error|", justify="right")
    table.add_column("status", no_wrap=True)
    for p in positions:
        index = item.indices[p] if item.indices is not None else index_of(p, shape)
        if jac_out or item.jacobian_shape:
            out_idx, in_idx = index[:jac_out], index[jac_out:]
            label = f"{index_text(out_idx)} ← {index_text(in_idx)}"
            flat_in = 0
            for i, n in zip(in_idx, item.shape, strict=True):
                flat_in = flat_in * n + i
            value = values[flat_in] if values and flat_in < len(values) else None
        else:
            label = index_text(index)
            value = values[p] if p < len(values) else None
        status = statuses[p] if p < len(statuses) else ""
        cells = [fmt(v[p]) if p < len(v) else "—" for v in columns.values()]
        err = errors[p] if p < len(errors) else None
        table.add_row(label, fmt(value), *cells, fmt(err), Text(status, style=style(status)))
    caption = []
    total = _total(item)
    if len(positions) < total:
        caption.append(f"showing {len(positions)} of {total:,} elements, worst first")
    if item.status_counts:
        caption.append(", ".join(f"{n:,} {s}" for s, n in item.status_counts.items()))
    caption.append(f"max |error| {fmt(item.max_abs_error)}")
    for k, column in enumerate(item.columns.values()):
        if column.failed:  # the engine being checked first: its failure is the finding
            what = column.label if k == 0 else f"{column.label} skipped"
            caption.append(f"{what}: {column.skipped}")
    table.caption = " · ".join(caption)
    table.caption_justify = "left"
    return table


def forward_table(fwd: ForwardReport, out_shape: Sequence[int]) -> Table:
    table = Table(box=box.SIMPLE_HEAD, title=Text.assemble(("forward mode J·t", "bold"), " · ",
                                      (fwd.status, style(fwd.status))),
                  title_justify="left")
    table.add_column("output index", justify="left")
    for column in fwd.columns.values():
        table.add_column(column.label, justify="right")
    table.add_column("status", no_wrap=True)
    columns = [flat(c.values) for c in fwd.columns.values()]
    statuses = flat(fwd.element_status)
    for p in range(min(len(columns[0]) or len(statuses), TABLE_ROWS)):
        index = fwd.indices[p] if fwd.indices is not None else index_of(p, out_shape)
        status = statuses[p] if p < len(statuses) else fwd.status
        table.add_row(index_text(index), *(fmt(v[p]) if p < len(v) else "—" for v in columns),
                      Text(status, style=style(status)))
    tangents = "; ".join(f"{n} = {_preview(TensorSummary([], v))}" for n, v in fwd.tangent.items())
    caption = [f"tangent {tangents}", f"max |error| {fmt(fwd.max_abs_error)}"]
    caption += [f"{c.label} skipped: {c.skipped}" for c in fwd.columns.values() if c.failed]
    table.caption = " · ".join(caption)
    table.caption_justify = "left"
    return table


def intermediates_table(report: Report) -> Table | None:
    if not report.intermediates:
        return None
    table = Table(title=Text("gradients of intermediate tensors (what .grad of a non-leaf "
                             "would hold)", style="bold"), title_justify="left",
                  box=box.SIMPLE_HEAD)
    for name in ("tensor", "op", "shape", "gradient", "flow"):
        table.add_column(name, no_wrap=name != "gradient")
    for item in report.intermediates:
        preview = _preview(TensorSummary(item["shape"], item["grad"],
                                         item.get("elements_reported", "all")))
        status = item.get("status", "ok")
        table.add_row(Text(printable(item["where"])), item["op"], str(tuple(item["shape"])),
                      preview,
                      Text(status, style={"vanishing": "bold red", "saturating": "yellow",
                                          "nan": "magenta"}.get(status, "green")))
    return table


def checks_table(report: Report) -> Table | None:
    if not report.upstream_checks:
        return None
    table = Table(title=Text("verdict also covers", style="bold"), title_justify="left",
                  box=box.SIMPLE_HEAD)
    for name in ("check", "result", "max |error|", "mismatches"):
        table.add_column(name)
    for c in report.upstream_checks:
        word = c.result
        ran = word != Status.NOT_RUN
        # (a check in place compares per call, with no single error to show: NaN)
        error = c.max_abs_error if ran and not math.isnan(c.max_abs_error) else None
        # (a test that compares no numbers, opcheck's: neither an error nor a count)
        counted = ran and (c.mismatches > 0 or not math.isnan(c.max_abs_error))
        table.add_row(c.label, Text(word, style=style(word)), fmt(error),
                      str(c.mismatches) if counted else "—")
    return table


MAX_BRANCHES = 12  # branch sites listed in the table (JSON keeps them all)


def branches_table(report: Report) -> Table | None:
    """Where the forward branched on the inputs' values and how many elements took each side
    (a one-sided site in the warning style: its other side was never tested)."""
    if not report.branches:
        return None
    table = Table(title=Text("branches reached", style="bold"), title_justify="left",
                  box=box.SIMPLE_HEAD)
    table.add_column("where")
    table.add_column("elements per side")
    for site in report.branches[:MAX_BRANCHES]:
        sides = " · ".join(f"{label}: {n:,}" for label, n in site["sides"].items() if n)
        style = "yellow" if site["one_sided"] else ""
        table.add_row(Text(printable(site["where"]), style=style),
                      Text(sides + ("  (one side only)" if site["one_sided"] else ""),
                           style=style))
    if len(report.branches) > MAX_BRANCHES:
        table.add_row(f"… and {len(report.branches) - MAX_BRANCHES} more (JSON: branches)", "")
    return table


def diagnostics_panel(report: Report) -> Panel | None:
    if not report.diagnostics:
        return None
    parts: list[RenderableType] = []
    shown_diagnostics, left = report.diagnostics, 0
    if report.model and not report.full:  # a model: those about the detailed tensors
        keep = {i.name for i in detailed(report)}
        shown_diagnostics = [d for d in report.diagnostics if d.kind != "mismatch_pattern"
                             or not d.inputs or set(d.inputs) & keep]
        left = len(report.diagnostics) - len(shown_diagnostics)
    for d in shown_diagnostics:
        # a model's finding is placed by its module (the message gives op and line)
        place = d.where if d.module is None else (d.module or "top level")
        line = Text.assemble((f"{d.kind}", "bold yellow"), f"  {printable(place)}  ")
        if d.inputs:
            names = grouped(d.inputs) if report.model else ", ".join(d.inputs)
            line.append(f"({d.count} element(s); inputs {names})", style="dim")
        parts.append(line)
        parts.append(Text(f"  {printable(d.message)}"))
        if d.indices:
            shown = "; ".join(f"{n}: " + " ".join(f"[{index_text(i)}]" for i in idx)
                              for n, idx in d.indices.items())
            parts.append(Text(f"  at {shown}", style="dim"))
        parts.append(Text(f"  hint: {printable(d.hint)}", style="italic"))
    if left:
        parts.append(Text(f"{left} more diagnostic(s) about the other failing tensors: "
                          "--full or --json shows them", style="dim"))
    return Panel(Group(*parts), title="diagnostics", title_align="left", expand=False)


def verdict(report: Report) -> Text:
    counts: dict[str, int] = {}
    for item in report.inputs:
        for status, n in item.status_counts.items():
            counts[status] = counts.get(status, 0) + n
    word = "PASSED" if report.passed else "FAILED"
    text = Text.assemble((word, "bold green" if report.passed else "bold red"))
    cause = headline(report)
    if cause:
        text.append(f"  {printable(cause)}", style="bold")
    text.append(f"{' · ' if cause else '  '}{len(report.inputs)} input(s): ")
    text.append(", ".join(f"{n:,} {s}" for s, n in counts.items()) or "nothing compared")
    if report.coverage:
        text.append(f"; {printable(report.coverage)}")
    if report.skipped:
        text.append(f"  (finite differences skipped for {', '.join(report.skipped)}: see the "
                    "notes)", style="bold yellow")
    if report.fail_on != "mismatch":
        text.append(f"  (--fail-on {report.fail_on})", style="dim")
    return text


def _no_table(item: InputReport) -> Text:
    """An input autograd gave nothing for (backward failed): one line, not a table of dashes."""
    title = Text.assemble((item.name, "bold"), f" · {item.role} · shape {shape_text(item.shape)}"
                          " · ", (item.status, style(item.status)))
    reason = item.columns["autograd"].skipped or "backward failed"
    title.append(f" · no gradient to compare: {printable(reason)}")
    return title


def renderables(report: Report) -> Iterable[RenderableType]:
    yield header(report)
    model = report.model
    if model:
        yield summary_table(report)
        start = where_wrong(report)
        if start is not None:
            yield start
    empty = no_gradient(report)
    for item in detailed(report) if model else report.inputs:
        yield input_table(item) if item.name not in empty else _no_table(item)
    absent = _absent(report)
    if absent is not None:
        yield absent
    if report.forward is not None:
        yield forward_table(report.forward, report.output.shape)
    for extra in (intermediates_table(report), checks_table(report), branches_table(report),
                  diagnostics_panel(report)):
        if extra is not None:
            yield extra
    if report.accumulation:
        acc = report.accumulation
        verdict_word = "confirmed" if acc["equals_repeat_times_vjp"] else "NOT equal"
        yield Text(f"--repeat {acc['repeat']}: {acc['note']} ({verdict_word})", style="cyan")
    notes = consolidated(report.notes, [i.name for i in report.inputs]) if model \
        else report.notes
    for note in notes:
        yield Text(f"note: {printable(note)}", style="dim")
    yield verdict(report)


def _absent(report: Report) -> Text | None:
    """Why a column that does not apply is '—' on every row (symbolic, for Python code):
    said once under the tables, not per table."""
    reasons: dict[str, set[str]] = {}
    for item in report.inputs:
        for column in item.columns.values():
            if column.values is None and column.skipped and not column.failed:
                reasons.setdefault(column.label, set()).add(column.skipped)
    shown = [f"{label} —: {next(iter(why))}" for label, why in reasons.items() if len(why) == 1
             and all(label in {c.label for c in i.columns.values()} for i in report.inputs)]
    return Text(printable(" · ".join(shown)), style="dim") if shown else None


def render(report: Report, console: Console) -> None:
    for item in renderables(report):
        console.print(item)
