"""The analyses, one module each, behind one protocol (`base.Feature`): what a feature
gathers, what it excuses (with the evidence that earns it), the checks it adds, the diagnoses
it writes and the report fields it fills. The stages (runner/) visit `FEATURES` in this order,
each hook under `base.Guard`: a feature that raises or does not fit steps aside with a note.

A feature declares the features it reads, by module: `needs` (read in the same stage — their
facts while gathering its own, their said value while diagnosing: they run first) and `reads`
(a later stage only). `ordered` keeps the listed order and moves a feature after what it needs;
it refuses a declaration of a feature not registered here, and tests/features/test_registry.py
holds every lookup of another feature (`ctx.of(M.FEATURE)`, `value_of(said, M.FEATURE)`) to a
declaration. Adding a feature: one module with a `FEATURE`, and its line here.
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
from gradscope.features.base import (
    Context,
    Diagnosis,
    Feature,
    Guard,
    Interim,
    StepAside,
    ordered,
)

FEATURES: tuple[Feature, ...] = ordered((
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
))

__all__ = ["FEATURES", "Context", "Diagnosis", "Feature", "Guard", "Interim", "StepAside"]
