"""The analyses, one module each, behind one protocol (`base.Feature`): what a feature
gathers, what it excuses (with the evidence that earns it), the checks it adds, the diagnoses
it writes and the report fields it fills. The stages (runner/) visit `FEATURES` in this order,
each hook under `base.Guard`: a feature that raises or does not fit steps aside with a note.

A feature declares the features it reads, by module: `needs` (read in the same stage — their
facts while gathering its own, their said value while diagnosing: they run first) and `reads`
(a later stage only). `ordered` keeps the listed order and moves a feature after what it needs;
it refuses a declaration of a feature not registered here, and tests/features/test_registry.py
holds every lookup of another feature (`ctx.of(M.FEATURE)`, `value_of(said, M.FEATURE)`) to a
declaration. Adding a feature: one module with a `FEATURE`, and its line here — its options
and report fields come with it (`owned_options`, `report_fields`: read at the time they are
asked, so a registration is there).
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

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
from gradscope.options import SPECS, Option, Spec
from gradscope.report.model import Report

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


def owned_options() -> dict[str, Option]:
    """The options the registered features own, by name (a name another option has, or one
    two features declare, is a registry error)."""
    out: dict[str, Option] = {}
    for feature in FEATURES:
        for option in feature.options:
            if option.name in SPECS or option.name in out:
                raise ValueError(f"feature {feature.name!r} declares the option "
                                 f"{option.name!r}, which another option has")
            out[option.name] = option
    return out


def every_spec() -> dict[str, Spec]:
    """Every option's spec: the core's, then the features' own."""
    return {**SPECS, **{name: o.spec for name, o in owned_options().items()}}


def report_fields() -> dict[str, Any]:
    """The report fields the registered features own, with the value each has where its
    feature says nothing (a field the Report itself has, or two features declare, is a
    registry error)."""
    out: dict[str, Any] = {}
    for feature in FEATURES:
        for name, default in feature.fields.items():
            if name in CORE_FIELDS or name in out:
                raise ValueError(f"feature {feature.name!r} declares the report field "
                                 f"{name!r}, which the report has")
            out[name] = copy.deepcopy(default)  # (a report's own, never shared)
    return out


CORE_FIELDS = {f.name for f in dataclasses.fields(Report)}

__all__ = ["FEATURES", "Context", "Diagnosis", "Feature", "Guard", "Interim", "StepAside"]
