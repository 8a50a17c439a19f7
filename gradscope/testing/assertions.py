"""`assert_gradients(fn, *inputs)`: fails with the table of what is wrong.

    from gradscope.testing import assert_gradients

    def test_my_function():
        assert_gradients(MyFunction, torch.randn(3, 8, dtype=torch.float64), 2)

Installed as a pytest plugin too: the fixture `assert_gradients` is the same function.
"""

from __future__ import annotations

import re
from typing import Any

from gradscope.api import check
from gradscope.report.headline import headline
from gradscope.report.model import Report
from gradscope.report.status import Status


def assert_gradients(fn: Any, *inputs: Any, grad: Any = None, atol: float | None = None,
                     rtol: float | None = None, **options: Any) -> Report:
    """Check `fn` (expression, Function, Module or function) at `inputs`; raise AssertionError
    whose message is the plain-text table of the failing elements and the diagnostics. Returns
    the Report when the check passes. Options are those of `gradscope.check`."""
    __tracebackhide__ = True  # pytest shows the caller's line, not ours
    report = check(fn, *inputs, grad=grad, atol=atol, rtol=rtol, **options)
    if not report.passed:
        raise AssertionError("gradscope: gradients do not check out\n"
                             + failing_text(report))
    return report


def in_python_terms(text: str) -> str:
    """A report's hints for someone calling from Python: `--surrogate NAME` is the
    `@gradscope.surrogate` marker on the Function (or `surrogate=[NAME]`), and every other
    flag its keyword (`--at x=…` → `x=…`, an input by name; `--max-fd N` → `max_fd=N`)."""
    from gradscope.features import every_spec

    text = re.sub(r"--surrogate(?: NAME(?:\[,NAME\])?)?",
                  "the @gradscope.surrogate marker on the Function (or surrogate=[NAME])", text)
    text = re.sub(r"--(?:at|const) (?=\w+=)", "", text)  # inputs are keywords by name
    for name, spec in sorted(every_spec().items(), key=lambda item: -len(item[1].flag)):
        # `--flag VALUE` → `name=VALUE` where a value follows, else `name=`
        text = re.sub(rf"{re.escape(spec.flag)}(?![\w-])(?:=| (?=[\d\[\"'A-Z]|\S*=))?",
                      f"{name}=", text)
    return text


def failing_text(report: Report, width: int = 110) -> str:
    """The report as plain text, keeping only the inputs that are not all `ok`, its hints
    and notes in Python's terms (the reader called from Python, not from a shell)."""
    from dataclasses import replace

    bad = [i for i in report.inputs if i.status not in (Status.OK, Status.SURROGATE)]
    trimmed = replace(report, inputs=bad or report.inputs,
                      diagnostics=[replace(d, hint=in_python_terms(d.hint),
                                           message=in_python_terms(d.message))
                                   for d in report.diagnostics],
                      notes=[in_python_terms(n) for n in report.notes])
    return trimmed.to_text(width=width)


def as_called(kw: dict[str, Any], dtype: str, judged: str) -> str:
    """The call's own tolerances, and what the failure was judged with (`judged`: "strict",
    gradscope's own tolerances; "call", the call's; "any", a failure no tolerance answers).
    The report's header shows the numbers."""
    called = ", ".join(f"{k}={kw[k]:g}" for k in ("eps", "atol", "rtol"))
    return f"called as gradcheck({called})" + {
        "strict": f"; strict: judged with gradscope's own tolerances for {dtype} (the header's)",
        "call": ": fails at these tolerances (the header's)",
        "any": ": fails whatever the tolerances (not a matter of precision)"}[judged]


def drop_in_failure(report: Report, called: str, strict: tuple[Status, ...]) -> str | None:
    """Why the drop-in fails this report (strict where gradcheck is), None when it passes."""
    declared = set(report.declared)
    bad = [i for i in report.inputs if i.status in strict
           or (i.status_counts.get(Status.SURROGATE) and i.name not in declared)]
    if report.passed and not bad:
        return None
    cause = headline(report) or "; ".join(
        f"{i.name}: {', '.join(f'{n} {s}' for s, n in i.status_counts.items())}" for i in bad)
    head = f"gradscope: gradcheck failed: {cause}" + (f"\n{called}" if called else "")
    return f"{head}\n{failing_text(report)}"
