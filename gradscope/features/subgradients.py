"""Kinks compared as subgradients. Where a finite-difference stencil crossed a kink the
derivative is not defined and the element is `nondifferentiable`; but whatever convention
autograd takes there, its value along that element must lie between the one-sided derivatives
(the generalized gradient's reach along the element's direction: at a max-, min- or abs-type
kink each active piece's slope lies between them). This feature measures those one-sided
derivatives of the target itself at the kink elements (two steps a side: the change between
them is the estimate's error) and re-marks as `mismatch` an element whose autograd value lies
outside; inside, it stays `nondifferentiable` (ok at a kink) and counts as compared. So an input
whose every element sits at a kink (abs at 0, ties of a max) is compared, not passed empty.

Only a kink the differences found themselves (inside a custom Function, code the op table does
not see) can be a mismatch so: at a kink of torch's own ops, autograd follows torch's
convention, which at a tie of several of them need not lie between the one-sided derivatives
(fmax(x, y) + fmin(x, y) is x + y, yet at x = y autograd gives x all of it): a tie, said in a
note, never a bug."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from gradscope.compare.elements import Comparison
from gradscope.errors import TargetError
from gradscope.evidence.gather import View
from gradscope.features.base import Context, Diagnosis, Feature
from gradscope.report.status import Status

MAX_KINKS = 256  # kink elements measured per check (four evaluations each)
MAX_ENTRIES = 1 << 22  # output entries kept per side over all measured elements (32 MB)
# elements the measuring evaluations may compute, all together (point.elements() each): a
# model with many kinks in its stencils measures a few of them, not a thousand forwards
MAX_WORK = 2e8
SLACK = 4.0  # the error estimate's multiple an interval is widened by


@dataclass(frozen=True)
class Sides:
    """The one-sided derivatives of one input's measured kink elements: flat positions, the
    output's change per unit step to the right and from the left ((k, out) each), and their
    error estimates (the change between a step and half of it, per entry)."""

    positions: torch.Tensor
    right: torch.Tensor
    left: torch.Tensor
    error: torch.Tensor
    ours: torch.Tensor  # (k,) bool: a kink no op of the op table explains (may mismatch)


@dataclass(frozen=True)
class SubgradientFacts:
    sides: dict[str, Sides]
    # per input, the most over the views (a memo the judge stage fills as it compares): kink
    # elements whose interval was compared, those found outside it (mismatches), and those
    # outside it at a tie of torch's own ops (its convention)
    compared: dict[str, int]
    outside: dict[str, int]
    ties: dict[str, int]


class Subgradients(Feature["SubgradientFacts"]):
    name = "subgradients"

    def facts(self, ctx: Context) -> SubgradientFacts | None:
        finite = ctx.evidence.finite
        if finite is None or finite.fd is None or finite.scale:
            return None
        budget = MAX_KINKS
        sides: dict[str, Sides] = {}
        for name, est in finite.estimates.items():
            if est is None or budget <= 0 or not bool(est.kink.any()):
                continue
            found = _measured(finite.fd, name, est.kink, est.kink_by_op, budget)
            if found is not None:
                sides[name] = found
                budget -= int(found.positions.numel())
        return SubgradientFacts(sides, {}, {}, {}) if sides else None

    def explain(self, ctx: Context, name: str, view: View, cmp: Comparison) -> Comparison:
        facts: SubgradientFacts | None = ctx.of(self)
        if facts is None or name not in facts.sides or view.jacobian or \
                view.upstream is None or not cmp.has(Status.NONDIFFERENTIABLE):
            return cmp
        sides = facts.sides[name]
        low, high, slack = _interval(sides, view.upstream)
        flat = sides.positions.to(cmp.status.device)
        grad = view.autograd[name].detach().reshape(-1)[flat].to(low.dtype).cpu()
        tol = ctx.evidence.tol
        slack = slack + tol.rtol * torch.maximum(low.abs(), high.abs()) + tol.atol
        beyond = torch.clamp(low - slack - grad, min=0) + torch.clamp(grad - high - slack, min=0)
        at_kink = cmp.status.reshape(-1)[flat].cpu() == Status.NONDIFFERENTIABLE.code
        outside = (beyond > 0) & at_kink & sides.ours
        ties = (beyond > 0) & at_kink & ~sides.ours
        for memo, count in ((facts.compared, at_kink), (facts.outside, outside),
                            (facts.ties, ties)):
            memo[name] = max(memo.get(name, 0), int(count.sum()))
        if not bool(outside.any()):
            return cmp
        return cmp.at_kink(flat[outside.to(flat.device)], beyond[outside])

    def diagnose(self, ctx: Context, verdict: Any, said: Mapping[str, Diagnosis]) -> Diagnosis:
        facts: SubgradientFacts | None = ctx.of(self)
        if facts is None or not facts.compared:
            return Diagnosis()
        notes = []
        for name, count in facts.compared.items():
            wrong, ties = facts.outside.get(name, 0), facts.ties.get(name, 0)
            said = [f"{wrong} lie outside, a mismatch"] if wrong else []
            said += [f"{ties} lie outside at a tie of torch's own ops (torch's convention "
                     "there, not compared)"] if ties else []
            notes.append(
                f"{name}: {count} element(s) at a kink compared as subgradients (autograd "
                "must lie between the one-sided derivatives there): "
                + ("; ".join(said) if said else "every one lies inside"))
        return Diagnosis(notes=tuple(notes))


def _measured(fd: Any, name: str, kink: torch.Tensor, explained: torch.Tensor, budget: int
              ) -> Sides | None:
    """The one-sided derivatives at up to `budget` of `name`'s kink elements (the first in
    order), each side at its step h and h/2; None where the target refuses the points."""
    point = fd.point
    out_numel = max(1, point.out.numel())
    limit = min(budget, MAX_ENTRIES // out_numel, int(MAX_WORK / (4 * max(point.elements(), 1))))
    if limit < 1:
        return None
    positions = torch.nonzero(kink.reshape(-1).cpu()).reshape(-1)[:limit]
    steps = point.step_at(name, positions.to(point.values[name].device))
    base = point.out.reshape(-1)
    right, left, error = [], [], []
    try:
        for position, step in zip(positions.tolist(), steps.tolist(), strict=True):
            moved = {s: _moved(point, name, position, s * step) for s in (1.0, 0.5, -0.5, -1.0)}
            r1, r2 = (moved[1.0] - base) / step, (moved[0.5] - base) / (step / 2)
            l1, l2 = (base - moved[-1.0]) / step, (base - moved[-0.5]) / (step / 2)
            right.append(r2)
            left.append(l2)
            error.append(torch.maximum((r1 - r2).abs(), (l1 - l2).abs()))
    except TargetError:  # the target refuses a point beside its kink: nothing measured
        return None
    ours = ~explained.reshape(-1).cpu()[positions]
    return Sides(positions, torch.stack(right), torch.stack(left), torch.stack(error), ours)


def _moved(point: Any, name: str, position: int, delta: float) -> torch.Tensor:
    """The target's output (flat) with one element of `name` moved by `delta`."""
    values = dict(point.values)
    moved = values[name].detach().clone()
    moved.view(-1)[position] += delta
    values[name] = moved
    out, _ = point.fn(values)
    return out.detach().reshape(-1).to(point.out.dtype)


def _interval(sides: Sides, upstream: torch.Tensor
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per measured element: the least and greatest one-sided derivative of vᵀf, and the
    slack their error estimate allows."""
    v = upstream.detach().reshape(-1).to(sides.right.dtype).cpu()
    right, left = sides.right.cpu() @ v, sides.left.cpu() @ v
    slack = SLACK * (sides.error.cpu() @ v.abs())
    return torch.minimum(right, left), torch.maximum(right, left), slack


FEATURE = Subgradients()
