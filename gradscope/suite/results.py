"""The results of `gradscope run`: one CheckResult per check, the SuiteReport over all, and
`run_one`, which turns one check into its result whatever the check does.

Outcomes: `passed`, `failed` (exit 1), `raised` (the user's code raised: exit 3), `error`:
bad usage found while running it (exit 2), or the user's code crashed, left or hung its
worker (`crashed`: exit 3), or gradscope's own code failed (`internal`: exit 4, never blamed
on the target). The suite's exit code is 2 if any check had a usage error, else 3 if any
raised or crashed, else 4 if gradscope failed, else 1 if any failed, else 0.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from gradscope._version import __version__
from gradscope.compare import outcome
from gradscope.errors import TargetError, UsageError
from gradscope.report import kinds
from gradscope.report.model import Report

SCHEMA = kinds.RUN


@dataclass
class CheckResult:
    name: str
    target: str
    command: str
    outcome: str  # passed | failed | error | raised
    seconds: float
    report: Report | None = None
    error: str | None = None
    crashed: bool = False  # `error` because the user's code crashed, left or hung the worker
    internal: bool = False  # `error` because gradscope's own code failed (a bug of ours)

    @property
    def exit_code(self) -> int:
        if self.outcome == "error":
            return 4 if self.internal else 3 if self.crashed else 2
        return {"passed": 0, "failed": 1, "raised": 3}[self.outcome]

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
                "crashed": self.crashed, "internal": self.internal,
                "report": self.report.to_dict() if self.report else None}


@dataclass
class SuiteReport:
    config: str
    results: list[CheckResult] = field(default_factory=list)
    schema: str = SCHEMA
    not_run: list[str] = field(default_factory=list)  # after the first failure, with -x
    notes: list[str] = field(default_factory=list)  # on the selection (--lf)
    verbosity: int = 0  # -v: every check's report; -q: the summary alone

    @property
    def passed(self) -> bool:
        return all(r.outcome == "passed" for r in self.results)

    @property
    def exit_code(self) -> int:
        codes = {r.exit_code for r in self.results}
        return next((code for code in (2, 3, 4, 1) if code in codes), 0)

    def to_dict(self) -> dict[str, Any]:
        counts: dict[str, int] = {}
        for r in self.results:
            counts[r.outcome] = counts.get(r.outcome, 0) + 1
        return {"schema": SCHEMA, "version": __version__, "config": self.config,
                "passed": self.passed, "exit_code": self.exit_code, "counts": counts,
                "not_run": list(self.not_run), "notes": list(self.notes),
                "checks": [r.to_dict() for r in self.results]}


def run_one(spec: Any) -> CheckResult:
    """One check (a suite.config.CheckSpec) → its result; nothing it raises escapes."""
    from gradscope.api import run

    tic = time.perf_counter()
    req = spec.request
    base = dict(name=spec.name, target=str(req.target), command=req.command)
    try:
        report = run(req)
    except TargetError as exc:
        return CheckResult(**base, outcome="raised", seconds=time.perf_counter() - tic,
                           error=str(exc))
    except UsageError as exc:
        return CheckResult(**base, outcome="error", seconds=time.perf_counter() - tic,
                           error=str(exc))
    except MemoryError:
        return CheckResult(**base, outcome="error", seconds=time.perf_counter() - tic,
                           error="the check ran out of memory (its memory limit, or the "
                                 "machine's)", crashed=True)
    except Exception as exc:  # a bug of gradscope's: this check's error, not the target's
        return CheckResult(**base, outcome="error", seconds=time.perf_counter() - tic,
                           error=f"internal error of gradscope: {type(exc).__name__}: {exc} "
                                 "(please report it)", internal=True)
    passed = report.passed or not outcome.fails(report)  # --fail-on never
    return CheckResult(**base, outcome="passed" if passed else "failed",
                       seconds=time.perf_counter() - tic, report=report)
