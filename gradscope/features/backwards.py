"""A hand-written backward's own named checks, on the target itself: linear in grad_output,
deterministic, and leaving grad_output unchanged. Each that fails is a diagnostic of a failing
kind (it fails the run: evidence about the target), and where backward is not linear its
elements are never excused as a surrogate (the surrogates feature reads `nonlinear`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from gradscope.diagnose import custom_backward
from gradscope.features.base import Context, Findings
from gradscope.report.model import Diagnostic


@dataclass(frozen=True)
class BackwardFacts:
    findings: tuple[Diagnostic, ...] = ()  # the checks that failed
    nonlinear: dict[str, torch.Tensor] = field(default_factory=dict)  # input → where


ROUNDOFF_ULPS = 256  # a compiled backward's round-off between two calls, in its dtype's eps


class Backwards(Findings):
    name = "backward checks"

    def facts(self, ctx: Context) -> BackwardFacts | None:
        prepared, back = ctx.prepared, ctx.evidence.backward
        if not prepared.target.checks_backward or back.grads is None:
            return None
        nondet = prepared.options.nondet_tol
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
        findings, nonlinear = custom_backward.backward_checks(
            prepared.target.text, back.engine, back.upstream, back.after, back.grads,
            ctx.evidence.autograd_tol, prepared.options.seed, nondet, back.repeated, back.apart,
            known)
        return BackwardFacts(findings, nonlinear)



FEATURE = Backwards()
