"""The terminal report of a model (more than a handful of tensors): one summary table, a row
per module and per tensor, instead of a per-element table for each; notes that say the same
of many tensors said once."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from rich import box
from rich.table import Table
from rich.text import Text

from gradscope.render.cells import fmt, printable, style
from gradscope.report.model import InputReport, Report
from gradscope.report.modules import TOGETHER, forward_sorted, module_of, together, wrong_from
from gradscope.report.status import Status

MODEL_DETAIL = 3  # failing tensors of a model that get a per-element table (all: --full)


def detailed(report: Report) -> list[InputReport]:
    """The tensors that get their own per-element table: all with --full, else the failing
    ones nearest the output (last in forward order: where wrong gradients start)."""
    if report.full:
        return list(report.inputs)
    ordered = forward_sorted(report.inputs, report.forward_order)
    aside = together(report.inputs, report.failures)  # (unchecked rows: nothing to show)
    failing = [i for i in ordered if not i.status.quiet and i.name not in aside]
    return failing[::-1][:MODEL_DETAIL]


def where_wrong(report: Report) -> Text | None:
    """The line that says where the wrong gradients start."""
    found = wrong_from(report.inputs, report.forward_order)
    if found is None:
        return None
    last, after, before = found
    text = Text.assemble(("wrong gradients start at ", "bold"), (printable(last), "bold red"))
    if after:
        text.append(f": the bug sits between it and {printable(after)} (which passes)")
    if before:
        text.append(f"; {before} failing tensor(s) before it in forward order may only "
                    "inherit its error, since gradients flow backward")
    aside = together(report.inputs, report.failures)
    failing = sum(1 for i in report.inputs if not i.status.quiet and i.name not in aside)
    if failing > MODEL_DETAIL:
        text.append(f" (per-element tables for the {MODEL_DETAIL} nearest the output; "
                    "--full for all)", style="dim")
    return text


SUMMARY_COLUMNS = (("module / tensor", "left"), ("shape", "left"), ("checked", "right"),
                   ("rel. error", "right"), ("‖grad‖", "right"), ("zeros", "right"),
                   ("status", "left"))


@dataclass(frozen=True)
class SummaryRow:
    """One row of a model's summary: a module path's roll-up or one of its tensors."""

    name: str  # the module path ("" for all tensors) or the tensor's full name
    depth: int  # the module path's depth (a tensor: its module's)
    module: bool
    cells: list[str]  # shape, checked, rel. error, ‖grad‖, zeros
    status: Status


def summary_rows(report: Report) -> Iterable[SummaryRow]:
    """Module roll-ups in order, each followed by its own tensors (the terminal and markdown
    summary tables both); where the drill-down placed a model's error, the tensors only
    projected together with others (inconclusive, nothing to read) are one last row, and a
    module holding nothing else is left out."""
    aside = together(report.inputs, report.failures)
    by_module: dict[str, list[InputReport]] = {}
    shown: set[str] = set()  # module paths that hold a tensor shown on its own row
    for item in report.inputs:
        if item.name in aside:
            continue
        by_module.setdefault(module_of(item.name), []).append(item)
        parts = module_of(item.name).split(".") if module_of(item.name) else []
        shown.update(".".join(parts[:k]) for k in range(len(parts) + 1))
    for entry in report.modules:
        path = entry["module"]
        if aside and path not in shown:
            continue
        depth = path.count(".") + 1 if path else 0
        yield SummaryRow(path, depth, True,
                         ["", f"{entry['checked']:,}/{entry['total']:,}", "", "", ""],
                         entry["status"])
        for item in by_module.get(path, []):
            yield SummaryRow(item.name, depth, False, [
                "×".join(map(str, item.shape)) or "()", f"{item.checked:,}/{item.total:,}",
                fmt(item.max_rel_error) if item.max_rel_error is not None else "—",
                fmt(item.grad_norm) if item.grad_norm is not None else "—",
                f"{100 * item.zero_fraction:.0f}%" if item.zero_fraction is not None else "—"],
                item.status)
    if aside:
        gathered = [i for i in report.inputs if i.name in aside]
        total = sum(i.total for i in gathered)
        yield SummaryRow(f"{len(gathered)} more tensor(s): {TOGETHER}", 0, False,
                         ["", f"{sum(i.checked for i in gathered):,}/{total:,}", "—", "—",
                          "—"], Status.INCONCLUSIVE)


def summary_table(report: Report) -> Table:
    table = Table(title="tensors by module", title_justify="left", box=box.SIMPLE_HEAD)
    for column, justify in SUMMARY_COLUMNS:
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for row in summary_rows(report):
        if row.module:
            failed = "✗ " if row.status.fails else ""
            label = Text("  " * max(row.depth - 1, 0) + (row.name or "all tensors"),
                         style="bold")
            status = Text(failed + row.status, style=style(row.status))
        else:
            leaf = row.name.rpartition(".")[2] if row.depth else row.name
            label = Text("  " * row.depth + leaf)
            status = Text(row.status, style=style(row.status))
        table.add_row(label, *row.cells, status)
    return table


def header_rows(report: Report) -> Iterable[tuple[str, str]]:
    """The header's input lines for a model: plain inputs one by one, parameters as one."""
    params = [i for i in report.inputs if i.role == "parameter"]
    for item in report.inputs:
        if item.role != "parameter":
            said = item.described or item.origin
            yield (f"input {printable(item.name)}",
                   f"shape {'×'.join(map(str, item.shape)) or '()'} · {printable(said)}")
    if params:
        total = sum(i.total for i in params)
        yield ("parameters", f"{len(params)} tensors, {total:,} elements (module parameters)")


def consolidated(notes: list[str], names: list[str]) -> list[str]:
    """Notes that differ only in the tensor they name, said once with the count."""
    pattern = re.compile("|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)
                                  if n)) if names else None
    groups: dict[str, list[str]] = {}
    order: list[str] = []
    for note in notes:
        # (a note naming two tensors or more is its own: one placeholder would stand for both)
        found = pattern.search(note) if pattern else None
        if found and len(set(pattern.findall(note))) > 1:
            found = None
        key = pattern.sub("{tensor}", note) if found and pattern else note
        if key not in groups:
            order.append(key)
            groups[key] = []
        if found:
            groups[key].append(found.group(0))
    out = []
    for key in order:
        named = groups[key]
        if len(named) <= 1:
            out.append(key.replace("{tensor}", named[0]) if named else key)
            continue
        shown = ", ".join(named[:3]) + (f", … ({len(named)} tensors)" if len(named) > 3 else "")
        out.append(key.replace("{tensor}", f"each of {shown}"))
    return out
