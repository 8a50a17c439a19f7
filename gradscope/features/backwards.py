"""A hand-written backward's own named checks, on the target itself: linear in grad_output,
deterministic, and leaving grad_output unchanged. Each that fails is a diagnostic of a failing
kind (it fails the run: evidence about the target), and where backward is not linear its
elements are never excused as a surrogate (the surrogates feature reads `nonlinear`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from gradscope.diagnose import custom_backward
from gradscope.features.base import Context, Feature, Said
from gradscope.report.model import Diagnostic


@dataclass(frozen=True)
class BackwardFacts:
    findings: tuple[Diagnostic, ...] = ()  # the checks that failed
    nonlinear: dict[str, torch.Tensor] = field(default_factory=dict)  # input → where


class Backwards(Feature):
    name = "backward checks"

    def facts(self, ctx: Context) -> BackwardFacts | None:
        prepared, back = ctx.prepared, ctx.evidence.backward
        if not prepared.target.checks_backward or back.grads is None:
            return None
        findings, nonlinear = custom_backward.backward_checks(
            prepared.target.text, back.engine, back.upstream, back.after, back.grads,
            ctx.evidence.tol, prepared.options.seed, prepared.options.nondet_tol)
        return BackwardFacts(findings, nonlinear)

    def target_checks(self, ctx: Context) -> tuple[Diagnostic, ...]:
        facts = ctx.of(self.name)
        return facts.findings if facts is not None else ()

    def diagnose(self, ctx: Context, verdict: Any, said: Any) -> Said:
        return Said(self.target_checks(ctx))


FEATURE = Backwards()
