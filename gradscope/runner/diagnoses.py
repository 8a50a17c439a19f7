"""The diagnoses stage: what the verdict means, as diagnostics and notes — each feature's
(gradscope/features/), in `FEATURES` order, each reading what the features before it said
(the culprits and surrogates name the relations found) — and a note for each feature that
stepped aside. Where backward itself failed, that failure is the one diagnostic."""

from __future__ import annotations

from dataclasses import dataclass, field

from gradscope import features as registry
from gradscope.evidence.gather import Evidence
from gradscope.evidence.prepare import Prepared
from gradscope.features import Diagnosis, Guard
from gradscope.report.model import Diagnostic
from gradscope.runner import failed
from gradscope.runner.excuses import Excuses
from gradscope.runner.judgement import Verdict


@dataclass(frozen=True)
class Diagnoses:
    diagnostics: tuple[Diagnostic, ...] = ()
    notes: tuple[str, ...] = ()
    aside: dict[str, str] = field(default_factory=dict)  # features that stepped aside: why


def diagnose(prepared: Prepared, evidence: Evidence, excuses: Excuses,
             verdict: Verdict) -> Diagnoses:
    if evidence.backward.grads is None:  # (runner/failed.py)
        return Diagnoses((failed.diagnostic(prepared, evidence),), aside=dict(verdict.aside))
    ctx, guard = excuses.context(prepared, evidence), Guard(registry.FEATURES, verdict.aside)
    said: dict[str, Diagnosis] = {}
    for feature in guard.active:
        said[feature.name] = guard.call(feature, feature.diagnose, Diagnosis(), ctx, verdict, said)
    return Diagnoses(tuple(d for s in said.values() for d in s.diagnostics),
                     tuple(n for s in said.values() for n in s.notes), guard.aside)


__all__ = ["Diagnoses", "diagnose"]
