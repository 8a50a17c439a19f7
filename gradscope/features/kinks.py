"""Kinks, jumps and poles: where a finite-difference stencil crossed one (a relu, clamp or
round switching inside it) the element is `nondifferentiable`, never a mismatch (the evidence
stage compares around them); this feature says which op and where (diagnose/kinks.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gradscope.diagnose import kinks
from gradscope.features.base import Context, Feature, Said


class Kinks(Feature):
    name = "kinks"

    def diagnose(self, ctx: Context, verdict: Any, said: Mapping[str, Said]) -> Said:
        finite = ctx.evidence.finite
        if finite is None or ctx.evidence.backward.grads is None:
            return Said()
        return Said(tuple(kinks.from_estimates(ctx.prepared.target.branch_sites,
                                               finite.estimates)))


FEATURE = Kinks()
