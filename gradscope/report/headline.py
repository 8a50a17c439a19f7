"""The one line that says why a report failed, written from the report's failures (the same
list `passed` is decided by), naming the cause the body explains: the relation a mismatch
follows, where a model's wrong gradients start, the input nothing was compared for, the
custom-backward check that failed. Every renderer leads with it, so a headline never
contradicts its body."""

from __future__ import annotations

from gradscope.report.model import Failure, Report
from gradscope.report.modules import wrong_from
from gradscope.report.status import FAILING_KINDS, Status

MAX_CAUSES = 4
SHORT = 120  # a check's message short enough for the headline


def causes(report: Report) -> list[str]:
    """Why the report failed, most specific first (empty when it passed)."""
    failures = report.failures
    found = [d.summary for d in report.diagnostics if d.kind == "culprit" and d.summary]
    seen: dict[str, int] = {}  # (the k-th failure of a kind is its k-th diagnostic's)
    for f in failures:
        if f.kind in FAILING_KINDS:
            found.append(_backward_check(f, report, seen.get(f.kind, 0)))
            seen[f.kind] = seen.get(f.kind, 0) + 1
    patterns = {d.inputs[0]: d.summary for d in report.diagnostics
                if d.kind == "mismatch_pattern" and d.inputs and d.summary}
    start = wrong_from(report.inputs, report.forward_order)
    if start is not None:  # a model: the wrong tensor nearest the output leads, the rest count
        name, _, before = start
        found.append(f"wrong gradients start at {name}: {patterns.get(name, 'mismatch')}" + (
            f" ({before} tensor(s) before it fail too)" if before else ""))
    # (an input with no gradient at all because backward failed: that failure says it once)
    refused = no_gradient(report) if any(f.kind in FAILING_KINDS for f in failures) else set()
    inputs = [f for f in failures if f.kind in (Status.MISMATCH, Status.INCONCLUSIVE)
              and f.subject not in refused]
    named = bool(found) and any(d.kind == "culprit" for d in report.diagnostics)
    # (a culprit named says how the inputs are wrong: their own patterns would repeat it)
    found += [_input(f, patterns) for f in inputs if start is None
              and not (named and f.kind == Status.MISMATCH)]
    if not inputs:  # (a check of no input is one in place: a culprit named says it already)
        found += [(f"{f.subject}: {f.count:,} mismatch(es)" if f.count else f"{f.subject} fails")
                  + (f" in {f.detail}" if f.detail else "")
                  for f in failures if f.kind == "check" and (f.detail or not named)]
    undefined = next((d.summary for d in report.diagnostics if d.kind == "nan" and d.summary),
                     None)
    found += [f"NaN or inf at the given inputs in {f.subject}"
              + (f", {undefined}" if undefined else "") + " (--allow-nan accepts it)"
              for f in failures if f.kind == "nonfinite"]
    found += [f"{f.subject}: mismatch" for f in failures if f.kind == "forward"]
    if not found:
        found += [f"{f.subject}: {f.detail}" for f in failures if f.kind == "warning"]
    return found


def _backward_check(failure: Failure, report: Report, k: int = 0) -> str:
    """'backward arity: Few.backward (few.py:7) returned 1 gradient(s) but forward took 2
    input(s)': the check's own words where it said them once for the whole run; else the
    summary of the diagnostic behind it ('compiled ∂/∂x ≠ eager')."""
    kind = [d for d in report.diagnostics if d.kind == failure.kind]
    said = [d.message for d in kind]
    what = failure.kind.replace("_", " ")
    if len(said) == 1 and said[0] and len(said[0]) <= SHORT:  # (a long one stays below)
        return f"{what}: {said[0]}"
    if k < len(kind) and kind[k].summary:
        return f"{what}: {kind[k].summary} ({failure.count} element(s))"
    return f"{what} ({failure.count} element(s))"


def no_gradient(report: Report) -> set[str]:
    """The inputs autograd gave nothing for: backward failed before any gradient."""
    out = set()
    for item in report.inputs:
        column = item.columns.get("autograd")
        if column is not None and column.failed and column.values is None:
            out.add(item.name)
    return out



def _input(failure: Failure, patterns: dict[str, str | None]) -> str:
    name = failure.subject
    if failure.kind == Status.INCONCLUSIVE:
        return f"{name}: inconclusive, nothing was compared ({failure.detail})"
    if patterns.get(name):
        return f"{name}: {patterns[name]}"
    if failure.count:
        return f"{name}: {failure.count:,} mismatching element(s)"
    return f"{name}: mismatch ({failure.detail or 'see below'})"


def headline(report: Report) -> str:
    """'w: autograd = 0.25 × the derivative at every element; b: …' (empty when passed)."""
    found = causes(report)
    shown = "; ".join(found[:MAX_CAUSES])
    return shown + (f"; and {len(found) - MAX_CAUSES} more" if len(found) > MAX_CAUSES else "")
