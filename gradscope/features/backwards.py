"""A hand-written backward's own named checks, on the target itself: linear in grad_output,
deterministic, and leaving grad_output unchanged. Each that fails is a diagnostic of a failing
kind (it fails the run), and where backward is not linear its elements are never excused as a
surrogate (the surrogates feature reads `nonlinear`).

The linearity check is a probe: it compares backward with itself. Evidence decides — every
upstream it asked (αv + βw, and v and w where it drew them) is also put to the references, and
where autograd's answers agree with theirs (an iterative solver's backward, linear only to its
own tolerance) the finding is a warning that says what it saw; where one disagrees (a constant
written for a multiple of grad_output), the run fails."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from gradscope.compare.elements import compare
from gradscope.evidence import custom_backward
from gradscope.features.base import Context, Diagnosis, Findings
from gradscope.options import RUNS, Option, Spec, finite_at_least_zero
from gradscope.report.model import Diagnostic
from gradscope.report.status import Status


@dataclass(frozen=True)
class BackwardFacts:
    findings: tuple[Diagnostic, ...] = ()  # the checks that failed
    nonlinear: dict[str, torch.Tensor] = field(default_factory=dict)  # input → where
    # a nonlinear backward whose answer to the probe's own upstream the evidence confirms: a
    # warning, with the note that says so
    warned: tuple[Diagnostic, ...] = ()
    notes: tuple[str, ...] = ()


ROUNDOFF_ULPS = 256  # a compiled backward's round-off between two calls, in its dtype's eps
NONDET_TOL = Option("nondet_tol", 0.0, Spec(
    "--nondet-tol", "How far two backward calls with the same upstream may differ before "
    "backward counts as nondeterministic (gradcheck's nondet_tol).", float, (int, float),
    "a number", commands=RUNS, panel="Tolerances and verdict"), finite_at_least_zero)


class Backwards(Findings["BackwardFacts"]):
    name = "backward checks"
    options = (NONDET_TOL,)

    def facts(self, ctx: Context) -> BackwardFacts | None:
        prepared, back = ctx.prepared, ctx.evidence.backward
        if not prepared.target.checks_backward or back.grads is None:
            return None
        nondet = NONDET_TOL.value(prepared.options)
        if prepared.target.precompiled or back.engine.compiled:
            # a compiled backward's kernels may sum in another
            # order from one call to the next: round-off is no nondeterminism
            largest = max((float(g.abs().max()) for g in back.grads.values()
                           if g.numel() and g.is_floating_point()), default=0.0)
            nondet = max(nondet, ROUNDOFF_ULPS * torch.finfo(back.engine.output.dtype).eps
                         * max(largest, 1.0))
        # (the random upstreams' VJPs were compared already: linearity asks only their mix)
        known = [(view.upstream, view.autograd) for view in ctx.evidence.views[1:]
                 if view.upstream is not None]
        findings, nonlinear, asked = custom_backward.backward_checks(
            prepared.target.text, back.engine, back.upstream, back.after, back.grads,
            ctx.evidence.autograd_tol, prepared.options.seed, nondet, back.repeated, back.apart,
            known)
        probed = [d for d in findings if d.kind == NONLINEAR]
        if not probed or not all(_confirmed(ctx, *question) for question in asked):
            return BackwardFacts(findings, nonlinear)
        return BackwardFacts(tuple(d for d in findings if d.kind != NONLINEAR), nonlinear,
                             tuple(probed), (
            "backward is not linear in grad_output (the linearity check's finding above), "
            "but its answers to that check's own upstreams agree with the references: a "
            "warning (a backward linear only to its own precision, an iterative solve), not "
            "a failure",))

    def diagnose(self, ctx: Context, verdict: Any, said: Mapping[str, Diagnosis]) -> Diagnosis:
        facts = ctx.of(self)
        if facts is None:
            return Diagnosis()
        return Diagnosis((*facts.findings, *facts.warned), facts.notes)


NONLINEAR = "nonlinear_backward"


def _confirmed(ctx: Context, upstream: torch.Tensor, answer: Mapping[str, torch.Tensor]
               ) -> bool:
    """Whether the references answer `upstream` as autograd did, at the evidence's own
    tolerance, for every input they compare (nothing compared: no confirmation)."""
    compared = False
    refs = [r for r in ctx.evidence.references if r.ran]
    answers = [r.vjp(upstream.to(torch.float64)) for r in refs]
    for name, grad in answer.items():
        theirs = [a[name] for a in answers if name in a]
        kink = next((k for r in refs for k in [r.kink(name)] if k is not None), None)
        cmp = compare(grad.detach(), theirs, ctx.evidence.tol, kink)
        if cmp.has(Status.MISMATCH):
            return False
        compared = compared or cmp.compared()
    return compared


FEATURE = Backwards()
