"""The excuses stage: each feature's facts (gradscope/features/), gathered in `FEATURES` order
from the evidence before anything is judged — what each analysis found that may change what a
disagreement means (a declaration, a step, torch's departure, a vanishing op), what it
compared of its own (projections, custom Functions in place) and the backward's own named
checks. `Excuses` maps each feature's name to its frozen facts; a feature that stepped aside
has none and is named in `aside`, with why."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from gradscope import features as registry
from gradscope.evidence.gather import Evidence
from gradscope.evidence.prepare import Prepared
from gradscope.features import Context, Guard
from gradscope.memory import gpu_peak, released


@dataclass(frozen=True)
class Excuses(Mapping[str, Any]):
    """Feature name → its facts; the features that stepped aside (name → why); how long each
    feature's gathering took."""

    facts: dict[str, Any] = field(default_factory=dict)
    aside: dict[str, str] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Any:
        return self.facts[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.facts)

    def __len__(self) -> int:
        return len(self.facts)

    def context(self, prepared: Prepared, evidence: Evidence) -> Context:
        return Context(prepared, evidence, self.facts)


def excuse(prepared: Prepared, evidence: Evidence) -> Excuses:
    """Each feature's facts, in order, each reading the facts gathered before it."""
    guard = Guard(registry.FEATURES)  # (read at run time: a registration is there)
    facts: dict[str, Any] = {}
    timings: dict[str, float] = {}
    for feature in guard.features:
        tic = time.perf_counter()
        found = guard.call(feature, feature.facts, None, Context(prepared, evidence, facts))
        released()  # (a model's temporaries of this feature gone before the next one's peak)
        if found is not None:
            facts[feature.name] = found
            timings[feature.name] = time.perf_counter() - tic
            if (peak := gpu_peak()) is not None:
                timings[f"gpu_peak.{feature.name}"] = peak
    return Excuses(facts, guard.aside, timings)


__all__ = ["Excuses", "excuse"]
