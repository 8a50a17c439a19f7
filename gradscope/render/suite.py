"""SuiteReport → rich summary table, markdown (for $GITHUB_STEP_SUMMARY) and JUnit XML."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from textwrap import shorten
from typing import Any

from rich import box
from rich.table import Table
from rich.text import Text

from gradscope.render.cells import fence, fmt, md, md_code, printable, xml_safe
from gradscope.render.console import record
from gradscope.render.markdown import render as report_markdown
from gradscope.render.table import render
from gradscope.report.headline import headline
from gradscope.report.status import Status

OUTCOME_STYLE = {"passed": "green", "failed": "bold red", "error": "bold red",
                 "raised": "bold magenta"}


def _diagnostics(result: Any) -> str:
    if result.report is None:
        return ""
    kinds: dict[str, int] = {}
    for d in result.report.diagnostics:
        kinds[d.kind] = kinds.get(d.kind, 0) + 1
    return ", ".join(f"{k}×{n}" if n > 1 else k for k, n in kinds.items())


def summary_table(suite: Any) -> Table:
    table = Table(title=Text(f"gradscope run · {printable(suite.config)}", style="bold"),
                  title_justify="left", box=box.SIMPLE_HEAD)
    for col in ("check", "target", "command", "verdict", "worst |error|", "diagnostics",
                "time"):
        table.add_column(col, justify="right" if col in ("worst |error|", "time") else "left")
    for r in suite.results:
        verdict = Text(r.outcome, style=OUTCOME_STYLE.get(r.outcome, ""))
        detail = _diagnostics(r) or (shorten(r.error.splitlines()[0], 60, placeholder=" …")
                                      if r.error else "")
        table.add_row(Text(printable(r.name)), Text(printable(r.target)), r.command, verdict,
                      fmt(r.worst_error), Text(printable(detail)), f"{r.seconds:.2f} s")
    table.caption = closing(suite)
    table.caption_style = (Status.OK if suite.passed else Status.MISMATCH).style
    table.caption_justify = "left"
    return table


def closing(suite: Any) -> str:
    """`PASSED: 3 passed` / `FAILED: 1 passed, 1 failed, 2 not run (stopped at the first
    failure, -x)`, and the notes on the selection."""
    counts = suite.to_dict()["counts"]
    word = "PASSED" if suite.passed else "FAILED"
    parts = [f"{n} {k}" for k, n in counts.items()]
    if suite.not_run:
        parts.append(f"{len(suite.not_run)} not run (stopped at the first failure, -x)")
    return " · ".join([f"{word}: " + ", ".join(parts), *map(printable, suite.notes)])


def statistics(suite: Any) -> str:
    """--statistics: the diagnostics by kind over all checks (ruff's --statistics), most
    frequent first, with the checks they came from."""
    counts: dict[str, list[str]] = {}
    for result in suite.results:
        for diagnostic in (result.report.diagnostics if result.report is not None else []):
            counts.setdefault(diagnostic.kind, []).append(result.name)
    if not counts:
        return "no diagnostics in any check"
    width = len(str(max(len(v) for v in counts.values())))
    lines = []
    for kind, names in sorted(counts.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        where = ", ".join(dict.fromkeys(names))
        lines.append(f"{len(names):>{width}}  {kind}  ({printable(shorten(where, 80))})")
    return "\n".join(lines)


def markdown(suite: Any) -> str:
    icon = "✅" if suite.passed else "❌"
    lines = [f"# gradscope run {icon} {'passed' if suite.passed else 'failed'}", "",
             f"config `{md_code(suite.config)}`", "",
             "| check | target | verdict | worst abs error | diagnostics |",
             "|---|---|---|---:|---|"]
    for r in suite.results:
        verdict = r.outcome if r.outcome == "passed" else f"**{r.outcome}**"
        lines.append(f"| {md(r.name)} | `{md_code(r.target)}` | {verdict} | "
                     f"{fmt(r.worst_error)} | {md(_diagnostics(r))} |")
    lines += ["", md(closing(suite)), ""]
    for r in suite.results:
        if r.outcome == "passed":
            continue
        lines += [f"## {md(r.name)}: {r.outcome}", ""]
        if r.report is not None:
            body = report_markdown(r.report).splitlines()
            lines += ["#" + line if line.startswith("##") else line for line in body[1:]]
        elif r.error:
            lines += [fence(r.error), printable(r.error), fence(r.error), ""]
    return "\n".join(lines).rstrip() + "\n"


def junit_xml(suite: Any) -> str:
    counts = {"failures": 0, "errors": 0}
    root = ET.Element("testsuites")
    node = ET.SubElement(root, "testsuite", name="gradscope", tests=str(len(suite.results)))
    total = 0.0
    for r in suite.results:
        total += r.seconds
        case = ET.SubElement(node, "testcase", classname=xml_safe(f"gradscope.{suite.config}"),
                             name=xml_safe(r.name),
                             time=f"{r.seconds:.6f}")
        if r.outcome == "failed":
            counts["failures"] += 1
            failure = ET.SubElement(case, "failure", message=xml_safe(_failure_message(r)),
                                    type="GradientMismatch")
            failure.text = xml_safe(record(lambda console, rep=r.report: render(rep, console),
                                           120) if r.report else "")
        elif r.outcome in ("error", "raised"):
            counts["errors"] += 1
            error = ET.SubElement(case, "error", type="UsageError" if r.outcome == "error"
                                  else "TargetError",
                                  message=xml_safe((r.error or "").splitlines()[0]) if r.error
                                  else "")
            error.text = xml_safe(r.error or "")
    for name in suite.not_run:  # -x: the checks after the first failure
        case = ET.SubElement(node, "testcase", classname=xml_safe(f"gradscope.{suite.config}"),
                             name=xml_safe(name), time="0")
        ET.SubElement(case, "skipped", message="not run: stopped at the first failure (-x)")
    counts["skipped"] = len(suite.not_run)
    tests = str(len(suite.results) + len(suite.not_run))
    for key, value in counts.items():
        node.set(key, str(value))
    node.set("tests", tests)
    node.set("time", f"{total:.6f}")
    root.set("tests", tests)
    for key, value in counts.items():
        root.set(key, str(value))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _failure_message(result: Any) -> str:
    report = result.report
    if report is None:
        return result.outcome
    cause = headline(report)  # the same cause the check's own report leads with
    kinds = _diagnostics(result)
    return (cause or result.outcome) + (f"; {kinds}" if kinds else "")


def show(suite: Any, console: Any) -> None:
    """The checks that did not pass, in full (-v: every check; -q: none), then the summary
    table."""
    for result in suite.results:
        if suite.verbosity < 0 or (result.outcome == "passed" and suite.verbosity < 1):
            continue
        console.rule(Text(f"{printable(result.name)}: {result.outcome}"))
        if result.report is not None:
            render(result.report, console)
        elif result.error:
            console.print(Text(printable(result.error)), highlight=False)
    console.print(summary_table(suite))
