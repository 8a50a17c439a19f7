"""The analyses, one module each, behind one protocol (`base.Feature`): what a feature
gathers, what it excuses (with the evidence that earns it), the checks it adds, the diagnoses
it writes and the report fields it fills. The stages (runner/) visit `FEATURES` in this order,
each hook under `base.Guard`: a feature that raises or does not fit steps aside with a note.

Order matters where a feature reads another's facts or said value: the backward checks before
surrogates (never excuse a backward that is not linear), projections before departures (which
re-run the disagreeing ones), relations before the culprits in place and the surrogates that
name them; departures explain before surrogates do. Adding a feature: one module with a
`FEATURE`, and its line here.
"""

from __future__ import annotations

from gradscope.features import (
    backwards,
    batched,
    collectives,
    compiled,
    departures,
    flow,
    inplace,
    kinks,
    layers,
    opchecks,
    projections,
    ranks,
    relations,
    single,
    subgradients,
    surrogates,
    vanishing,
)
from gradscope.features.base import Context, Decided, Feature, Guard, Said, StepAside

FEATURES: tuple[Feature, ...] = (
    backwards.FEATURE,
    projections.FEATURE,
    kinks.FEATURE,
    subgradients.FEATURE,
    flow.FEATURE,
    relations.FEATURE,
    inplace.FEATURE,
    departures.FEATURE,
    surrogates.FEATURE,
    vanishing.FEATURE,
    layers.FEATURE,
    ranks.FEATURE,
    collectives.FEATURE,
    single.FEATURE,
    compiled.FEATURE,
    opchecks.FEATURE,
    batched.FEATURE,
)

__all__ = ["FEATURES", "Context", "Decided", "Feature", "Guard", "Said", "StepAside"]
