"""Kinks, jumps and poles: where a finite-difference stencil crossed one (a relu, clamp or
round switching inside it) the element is `nondifferentiable`, never a mismatch (the evidence
stage compares around them); this feature says which op and where (by op, from the op table's
`kink`), which elements never converged, and (`nan_diagnostic`, for the flow feature) where the
function or its gradient is not finite."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from gradscope.expr.ops import OPS
from gradscope.features.base import Context, Diagnosis, Feature
from gradscope.report.build import mask_indices
from gradscope.report.model import Diagnostic


def kink_diagnostics(sites: Sequence[Any], masks: dict[str, dict[int, torch.Tensor]],
                     unexplained: dict[str, torch.Tensor]) -> list[Diagnostic]:
    """One `nondifferentiable_point` diagnostic per kinky op whose stencil was crossed."""
    out = []
    for k, site in enumerate(sites):
        per_input = {name: m[k] for name, m in masks.items() if k in m and bool(m[k].any())}
        if not per_input:
            continue
        count = sum(int(m.sum()) for m in per_input.values())
        kind = OPS[site.op].kink or "kink"
        out.append(Diagnostic(
            kind="nondifferentiable_point", op=site.op, where=site.where,
            inputs=sorted(per_input), count=count,
            message=(f"{count} element(s) lie within the finite-difference step of a {kind} "
                     f"of `{site.where}`; the derivative is not defined there, so these "
                     "elements are not compared"),
            hint=("autograd returns torch's convention at such points; move the input away "
                  "from it, or lower --eps to look closer"),
            indices={n: mask_indices(m) for n, m in per_input.items()}))
    loose = {n: m for n, m in unexplained.items() if bool(m.any())}
    if loose:
        count = sum(int(m.sum()) for m in loose.values())
        out.append(Diagnostic(
            kind="nondifferentiable_point", op="", where="(finite differences)",
            inputs=sorted(loose), count=count,
            message=(f"{count} element(s) lie within the finite-difference step of a kink, "
                     "jump or pole that the differences found themselves (the slopes on either "
                     "side differ, or no step tried converged); the derivative is not defined "
                     "there, so these elements are not compared"),
            hint="autograd returns the code's own convention at such points; move the input "
                 "away from it, or lower --eps to look closer",
            indices={n: mask_indices(m) for n, m in loose.items()}))
    return out


def nan_diagnostic(target: str, undefined: dict[str, torch.Tensor]) -> Diagnostic | None:
    bad = {n: m for n, m in undefined.items() if bool(m.any())}
    if not bad:
        return None
    count = sum(int(m.sum()) for m in bad.values())
    return Diagnostic(
        kind="nan", op="", where=target, inputs=sorted(bad), count=count,
        message=(f"{count} element(s) where the function or its gradient is not finite "
                 "(NaN or infinity): the gradient is undefined there"),
        hint=("keep inputs inside the domain of every op (log and sqrt need x > 0, "
              "asin/acos need |x| <= 1, no division by 0)"),
        indices={n: mask_indices(m) for n, m in bad.items()})


def from_estimates(sites: Sequence[Any], estimates: Mapping[str, Any]) -> list[Diagnostic]:
    """Kink diagnostics from the finite-difference estimates' masks: by op where a branch id
    changed, and as unconverged where none explains the kink."""
    found = {n: e for n, e in estimates.items() if e}
    masks = {n: e.kink_by_branch for n, e in found.items()}
    unexplained = {n: e.kink & ~e.kink_by_op for n, e in found.items()}
    return kink_diagnostics(sites, masks, unexplained)


class Kinks(Feature[None]):
    name = "kinks"

    def diagnose(self, ctx: Context, verdict: Any, said: Mapping[str, Diagnosis]) -> Diagnosis:
        finite = ctx.evidence.finite
        if finite is None or ctx.evidence.backward.grads is None:
            return Diagnosis()
        return Diagnosis(tuple(from_estimates(ctx.prepared.target.branch_sites,
                                               finite.estimates)))


FEATURE = Kinks()
