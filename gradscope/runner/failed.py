"""What a backward that could not run means, in one place for every stage: each input is a
mismatch and the failure says why (the verdict); that failure, over every input, is the one
diagnostic (the diagnoses); and each input's row shows what the references say its gradient
is — answered in the evidence stage (`Evidence.unanswered`) — beside autograd's failure (the
report)."""

from __future__ import annotations

from dataclasses import replace

from gradscope.compare import outcome
from gradscope.evidence.gather import Evidence
from gradscope.evidence.prepare import Prepared
from gradscope.report import build
from gradscope.report.model import Column, Diagnostic, Failure, InputReport
from gradscope.report.status import Status


def _failure(evidence: Evidence) -> Diagnostic:
    failure = evidence.backward.failure
    assert failure is not None
    return failure


def _elements(prepared: Prepared) -> int:
    return sum(prepared.bound.cast[n].numel() for n in prepared.target.names)


def verdict(prepared: Prepared, evidence: Evidence
            ) -> tuple[dict[str, Status], tuple[Failure, ...]]:
    """Every input a mismatch, and the failures: the backward's own, each input's, NaN or inf
    at the inputs."""
    names, failure = prepared.target.names, _failure(evidence)
    failures = [Failure(failure.kind, failure.kind, _elements(prepared))]
    failures += [Failure(Status.MISMATCH, n, 0, f"backward failed: {failure.message}")
                 for n in names]  # (no count)
    failures += outcome.nonfinite_failures(evidence.nonfinite, prepared.options.allow_nan)
    return dict.fromkeys(names, Status.MISMATCH), tuple(failures)


def diagnostic(prepared: Prepared, evidence: Evidence) -> Diagnostic:
    """The backward's failure, over every input."""
    return replace(_failure(evidence), inputs=list(prepared.target.names),
                   count=_elements(prepared))


def inputs(prepared: Prepared, evidence: Evidence) -> list[InputReport]:
    """Each input's row: the references' answers beside autograd's failure."""
    bound, answers = prepared.bound, evidence.unanswered
    reason = f"backward failed: {_failure(evidence).message}"
    out = []
    for name in prepared.target.names:
        columns = {build.AUTOGRAD: Column(skipped=reason, label=build.AUTOGRAD, failed=True)}
        for reference in evidence.references:
            answer = answers.get(reference.name, {}).get(name)
            why = reference.skipped.get(name)
            columns[reference.name] = Column(
                build.plain(answer.values) if answer is not None else None,
                skipped=why, mode=reference.mode(name), label=reference.label,
                failed=why is not None and reference.answers_all)
        values = build.plain(bound.cast[name])
        shown = next((c.values for c in columns.values() if c.values is not None), values)
        out.append(InputReport(
            name=name, role=prepared.target.roles().get(name, "input"),
            shape=list(bound.cast[name].shape), values=values, columns=columns, formula=None,
            max_abs_error=float("nan"), status=Status.MISMATCH, origin=bound.values[name].origin,
            described=bound.values[name].brief,
            rows=build.rows(None, None, len(build.flat(shown)), prepared.options.full)))
    return out
