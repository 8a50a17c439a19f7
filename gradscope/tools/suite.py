"""`gradscope run`: every configured check, one summary, one exit code.

One check failing or raising never stops the others. The outcome of each is `passed`,
`failed`, `error` (bad usage found while running it: exit 2) or `raised` (the user's code
raised: exit 3). The suite's exit code is 2 if any check had a usage error, else 3 if any
raised, else 1 if any failed, else 0.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gradscope._version import __version__
from gradscope.errors import TargetError, UsageError
from gradscope.report.model import Report
from gradscope.tools.config import CheckSpec, load
from gradscope.verdict import outcome

SCHEMA = "gradscope.run/1"


@dataclass
class CheckResult:
    name: str
    target: str
    command: str
    outcome: str  # passed | failed | error | raised
    seconds: float
    report: Report | None = None
    error: str | None = None

    @property
    def worst_error(self) -> float | None:
        if self.report is None or not self.report.inputs:
            return None
        values = [i.max_abs_error for i in self.report.inputs]
        return max(values) if values else None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "target": self.target, "command": self.command,
                "outcome": self.outcome, "passed": self.outcome == "passed",
                "seconds": round(self.seconds, 6), "error": self.error,
                "report": self.report.to_dict() if self.report else None}


@dataclass
class SuiteReport:
    config: str
    results: list[CheckResult] = field(default_factory=list)
    schema: str = SCHEMA

    @property
    def passed(self) -> bool:
        return all(r.outcome == "passed" for r in self.results)

    @property
    def exit_code(self) -> int:
        outcomes = {r.outcome for r in self.results}
        for word, code in (("error", 2), ("raised", 3), ("failed", 1)):
            if word in outcomes:
                return code
        return 0

    def to_dict(self) -> dict[str, Any]:
        counts: dict[str, int] = {}
        for r in self.results:
            counts[r.outcome] = counts.get(r.outcome, 0) + 1
        return {"schema": SCHEMA, "version": __version__, "config": self.config,
                "passed": self.passed, "exit_code": self.exit_code, "counts": counts,
                "checks": [r.to_dict() for r in self.results]}


def run_checks(specs: list[CheckSpec], config: str,
               on_result: Callable[[CheckResult], None] | None = None) -> SuiteReport:
    from gradscope.runner import run

    suite = SuiteReport(config)
    for spec in specs:
        tic = time.perf_counter()
        req = spec.request
        base = dict(name=spec.name, target=str(req.target), command=req.command)
        try:
            report = run(req)
            result = CheckResult(**base, outcome="passed" if report.passed else "failed",
                                 seconds=time.perf_counter() - tic, report=report)
        except TargetError as exc:
            result = CheckResult(**base, outcome="raised", seconds=time.perf_counter() - tic,
                                 error=str(exc))
        except UsageError as exc:
            result = CheckResult(**base, outcome="error", seconds=time.perf_counter() - tic,
                                 error=str(exc))
        if result.outcome == "failed" and result.report and not outcome.fails(result.report):
            result.outcome = "passed"  # --fail-on never
        suite.results.append(result)
        if on_result is not None:
            on_result(result)
    return suite


def run_config(path: str | Path | None = None,
               on_result: Callable[[CheckResult], None] | None = None) -> SuiteReport:
    """Load and run a config (pyproject.toml by default); returns the SuiteReport. Config errors
    raise UsageError before any check runs."""
    specs, where = load(Path(path) if path is not None else None)
    return run_checks(specs, str(where), on_result)
