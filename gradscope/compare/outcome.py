"""Why a run fails — the one place that decides it: a `Failure` for each input that mismatches
or had nothing compared, each failing custom-backward check, each named check that failed, NaN
or inf at the given inputs (unless allowed), forward mode, and with `--fail-on warning` any
diagnostic or status other than ok. A report passes when it has no failure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from gradscope.report.model import Diagnostic, Failure, NamedCheck, Report
from gradscope.report.status import FAILING_KINDS, Status

NOTHING_COMPARED = "no engine compared any element"


def failures(*, statuses: Mapping[str, Status], mismatches: Mapping[str, int],
             unjudged: Mapping[str, str], findings: Iterable[Diagnostic],
             checks: Sequence[NamedCheck], forward: Status | None,
             nonfinite: Sequence[str], allow_nan: bool) -> list[Failure]:
    """The failures of a judged run, whatever --fail-on says (`unjudged`: input → why no
    engine compared it)."""
    out = [Failure(d.kind, d.kind, d.count) for d in findings if d.kind in FAILING_KINDS]
    for name, status in statuses.items():
        if status == Status.MISMATCH:
            out.append(Failure(Status.MISMATCH, name, mismatches.get(name, 0)))
        elif status == Status.INCONCLUSIVE:
            out.append(Failure(Status.INCONCLUSIVE, name, 0,
                               unjudged.get(name) or NOTHING_COMPARED))
    for check in checks:
        if not check.passed:
            bad = [n for n, s in check.statuses.items() if s == Status.MISMATCH]
            out.append(Failure("check", check.label, check.mismatches, ", ".join(bad)))
    out += nonfinite_failures(nonfinite, allow_nan)
    if forward == Status.MISMATCH:
        out.append(Failure("forward", "forward mode J·t"))
    return out


def nonfinite_failures(nonfinite: Sequence[str], allow_nan: bool) -> list[Failure]:
    """NaN or inf in the output or autograd's gradient at the given inputs, unless allowed."""
    if not nonfinite or allow_nan:
        return []
    return [Failure("nonfinite", ", ".join(nonfinite))]


def warnings(diagnostics: Iterable[Diagnostic], statuses: Iterable[Status],
             forward: Status | None) -> list[Failure]:
    """--fail-on warning: any diagnostic, any input not `ok` and forward mode not `ok` fail."""
    kinds = sorted({d.kind for d in diagnostics})
    words = sorted({str(s) for s in statuses if s != Status.OK})
    if forward is not None and forward != Status.OK:
        words.append(f"forward mode {forward}")
    if not kinds and not words:
        return []
    return [Failure("warning", "--fail-on warning", len(kinds) + len(words),
                    ", ".join(kinds + words))]


def fails(report: Report) -> bool:
    """Whether the report fails its run (exit 1): it did not pass and `--fail-on` is not
    `never`."""
    return not report.passed and report.fail_on != "never"
