"""`assert_gradients(fn, *inputs)`: fails with the table of what is wrong.

    from gradscope.testing import assert_gradients

    def test_my_function():
        assert_gradients(MyFunction, torch.randn(3, 8, dtype=torch.float64), 2)

Installed as a pytest plugin too: the fixture `assert_gradients` is the same function.
"""

from __future__ import annotations

from typing import Any

from gradscope.api import check
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


def failing_text(report: Report, width: int = 110) -> str:
    """The report as plain text, keeping only the inputs that are not all `ok`."""
    from dataclasses import replace

    bad = [i for i in report.inputs if i.status not in (Status.OK, Status.SURROGATE)]
    trimmed = replace(report, inputs=bad or report.inputs)
    return trimmed.to_text(width=width)
