"""The one line that says why a report failed, naming the cause the body explains: the
relation a mismatch follows, the input nothing was compared for, the custom-backward check
that failed. Every renderer leads with it, so a headline never contradicts its body."""

from __future__ import annotations

from gradscope.report.model import Report
from gradscope.report.modules import wrong_from
from gradscope.report.status import FAILING_KINDS

MAX_CAUSES = 4


def causes(report: Report) -> list[str]:
    """Why the report failed, most specific first (empty when it passed)."""
    if report.passed:
        return []
    found = [f"{d.kind.replace('_', ' ')} ({d.count} element(s))"
             for d in report.diagnostics if d.kind in FAILING_KINDS]
    patterns = {d.inputs[0]: d.summary for d in report.diagnostics
                if d.kind == "mismatch_pattern" and d.inputs and d.summary}
    start = wrong_from(report.inputs, report.forward_order)
    if start is not None:  # a model: the wrong tensor nearest the output leads, the rest count
        name, _, before = start
        cause = patterns.get(name, "mismatch")
        found.append(f"wrong gradients start at {name}: {cause}" + (
            f" ({before} tensor(s) before it fail too)" if before else ""))
    for item in report.inputs if start is None else []:
        if item.status == "mismatch":
            n = item.status_counts.get("mismatch", 0)
            found.append(f"{item.name}: {patterns[item.name]}" if item.name in patterns
                         else f"{item.name}: {n:,} mismatching element(s)" if n
                         else f"{item.name}: mismatch ({item.autograd_skipped or 'see below'})")
        elif item.status == "inconclusive":
            why = item.finite_difference_skipped or "no engine compared any element"
            found.append(f"{item.name}: inconclusive, nothing was compared ({why})")
    if not any(i.status in ("mismatch", "inconclusive") for i in report.inputs):
        for check in report.upstream_checks:
            if not check.passed:
                bad = [n for n, s in check.statuses.items() if s == "mismatch"]
                found.append(f"{check.label}: {check.mismatches:,} mismatch(es) in "
                             f"{', '.join(bad)}")
    if report.nonfinite and not report.allow_nan:
        found.append(f"NaN or inf at the given inputs in {', '.join(report.nonfinite)} "
                     "(--allow-nan accepts it)")
    if report.forward is not None and report.forward.status == "mismatch":
        found.append("forward mode J·t: mismatch")
    if not found and report.fail_on == "warning":
        kinds = sorted({d.kind for d in report.diagnostics})
        statuses = sorted({i.status for i in report.inputs if i.status != "ok"})
        found.append("--fail-on warning: " + ", ".join(kinds + statuses))
    return found


def headline(report: Report) -> str:
    """'w: autograd = 0.25 × the derivative at every element; b: …' (empty when passed)."""
    found = causes(report)
    shown = "; ".join(found[:MAX_CAUSES])
    return shown + (f"; and {len(found) - MAX_CAUSES} more" if len(found) > MAX_CAUSES else "")
