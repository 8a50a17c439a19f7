"""Report → GitHub-flavoured markdown (for $GITHUB_STEP_SUMMARY or a PR comment)."""

from __future__ import annotations

from gradscope.render.cells import flat, fmt, index_of, index_text, md, md_code
from gradscope.render.summary import (
    SUMMARY_COLUMNS,
    consolidated,
    detailed,
    summary_rows,
    where_wrong,
)
from gradscope.report.headline import headline, no_gradient
from gradscope.report.model import InputReport, NamedCheck, Report
from gradscope.report.modules import grouped
from gradscope.report.status import Status


def _model_summary(report: Report) -> list[str]:
    """A model's one table: a row per module path (bold, with its roll-up) and per tensor."""
    lines = ["| " + " | ".join(name for name, _ in SUMMARY_COLUMNS) + " |",
             "|" + "|".join("---:" if justify == "right" else "---"
                            for _, justify in SUMMARY_COLUMNS) + "|"]
    for row in summary_rows(report):
        if row.module:
            name = f"**{md(row.name or 'all tensors')}**"
            status = f"**✗ {row.status}**" if row.status.fails else str(row.status)
        else:
            name = md(row.name)
            status = f"**{row.status}**" if row.status != Status.OK else str(row.status)
        lines.append("| " + " | ".join([name, *row.cells, status]) + " |")
    start = where_wrong(report)
    return [*lines, "", *([md(start.plain), ""] if start is not None else [])]


def _input(item: InputReport) -> list[str]:
    lines = [f"### `{md_code(item.name)}` — {item.role}, shape {tuple(item.shape)}: "
             f"**{item.status}**", ""]
    if item.formula:
        lines += [f"VJP formula: `{md_code(item.formula)}`", ""]
    shape = item.jacobian_shape or item.shape
    statuses = flat(item.element_status) or [item.status] * len(item.rows)
    columns = [flat(c.values) for c in item.columns.values()] + [flat(item.error)]
    lines += ["| index | " + " | ".join(c.label for c in item.columns.values())
              + " | abs error | status |",
              "|---|" + "---:|" * (len(columns)) + "---|"]
    for p in item.rows:
        index = item.indices[p] if item.indices is not None else index_of(p, shape)
        row = [md(index_text(index))] + [md(fmt(c[p])) if p < len(c) else "—"
                                         for c in columns]
        status = statuses[p] if p < len(statuses) else item.status
        row.append(f"**{md(status)}**" if status != Status.OK else md(status))  # (bold kept)
        lines.append("| " + " | ".join(row) + " |")
    counts = ", ".join(f"{n} {s}" for s, n in item.status_counts.items())
    lines += ["", f"{counts + '; ' if counts else ''}max abs error {fmt(item.max_abs_error)}"]
    for column in item.columns.values():
        if column.skipped:
            lines.append(f"{column.label} skipped: {md(column.skipped)}")
    return [*lines, ""]


def _result(check: NamedCheck) -> str:
    word = check.result
    return f"**{word}**" if word.fails else str(word)


def _setting(report: Report) -> list[str]:
    """Dtype, seed and tolerances; what a model at scale compared how; the --const inputs."""
    lines = [f"dtype {report.dtype} on {report.device}, seed {report.seed}, "
             f"rtol {report.tolerances.get('rtol', 0):g}, atol "
             f"{report.tolerances.get('atol', 0):g}; output shape {tuple(report.output.shape)}",
             ""]
    if report.coverage:
        lines += [f"**How much was compared:** {md(report.coverage)}", ""]
    if report.constants:
        held = ", ".join(f"`{md_code(n)}` {tuple(c['shape'])} {c['dtype']}"
                         for n, c in report.constants.items())
        lines += [f"data inputs (--const, not differentiated): {held}", ""]
    return lines


def render(report: Report) -> str:
    verdict = "✅ passed" if report.passed else "❌ failed"
    if headline(report):
        verdict += f": {md(headline(report))}"
    if report.skipped:
        verdict += f" (finite differences skipped for {md(', '.join(report.skipped))})"
    lines = [f"## gradscope {report.command}: `{md_code(report.target)}` — {verdict}", "",
             *_setting(report)]
    model = report.model
    if model:
        lines += _model_summary(report)
    empty = no_gradient(report)
    for item in detailed(report) if model else report.inputs:
        lines += _input(item) if item.name not in empty else [
            f"### `{md_code(item.name)}` — {item.role}, shape {tuple(item.shape)}: "
            f"**{item.status}**, no gradient to compare: "
            f"{md(item.columns['autograd'].skipped or 'backward failed')}", ""]
    if report.forward is not None:
        f = report.forward
        lines += [f"### forward mode J·t: **{f.status}** (max abs error "
                  f"{fmt(f.max_abs_error)})", ""]
    if report.intermediates:
        lines += ["| intermediate | op | shape | gradient |", "|---|---|---|---|"]
        for item in report.intermediates:
            grad = flat(item["grad"]) if isinstance(item["grad"], list) else [item["grad"]]
            shown = ", ".join(fmt(g) for g in grad[:6]) + (", …" if len(grad) > 6 else "")
            lines.append(f"| `{md_code(item['where'])}` | {item['op']} | {tuple(item['shape'])} "
                         f"| {md(shown)} |")
        lines.append("")
    if report.upstream_checks:
        lines += ["| also checked | result | max abs error |", "|---|---|---:|"]
        lines += [f"| {md(c.label)} | {_result(c)} | "
                  f"{fmt(c.max_abs_error) if c.result != 'not run' else '—'} |"
                  .replace("| nan |", "| — |")
                  for c in report.upstream_checks]
        lines.append("")
    if report.branches:
        lines += ["| branch | elements per side |", "|---|---|"]
        lines += [f"| `{md_code(b['where'])}` | "
                  + md(" · ".join(f"{k}: {n:,}" for k, n in b["sides"].items() if n))
                  + (" **(one side only)**" if b["one_sided"] else "") + " |"
                  for b in report.branches]
        lines.append("")
    if report.diagnostics:
        lines += ["### Diagnostics", ""]
        lines += [f"- **{d.kind}** `{md_code(d.where if d.module is None else d.module)}` "
                  f"({d.count} element(s), inputs "
                  f"{grouped(d.inputs) if model else ', '.join(d.inputs)}): {md(d.message)} "
                  f"*Hint:* {md(d.hint)}" for d in report.diagnostics]
        lines.append("")
    if report.accumulation:
        lines += [f"- --repeat {report.accumulation['repeat']}: "
                  f"{md(report.accumulation['note'])}"]
    notes = consolidated(report.notes, [i.name for i in report.inputs]) if model \
        else report.notes
    lines += [f"- note: {md(n)}" for n in notes]
    return "\n".join(lines).rstrip() + "\n"
