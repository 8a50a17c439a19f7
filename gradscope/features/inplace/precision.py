"""A custom Function's call under --autocast, judged at the precision it computed in: a
bfloat16 backward's rounding is no culprit, so its call is judged at bfloat16's tolerance (or,
where only its answer was rounded to one, the run's widened by a unit of it); a half-precision
path of the backward's own that is wrong by less than that tolerance shows as a common factor
of its answer no rounding makes (`relations.common_factor`), held on a fresh gradient from
above (rule 4). Such a call is `systematic`: reach.py proves what it moves in the target."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

import torch

from gradscope.compare.tolerance import Tolerance
from gradscope.explain import relations
from gradscope.features.inplace.calls import FunctionCall
from gradscope.report.status import Status

HALVES = (torch.float16, torch.bfloat16)
# a common factor this many units of a half precision away from 1 is no rounding of it (a
# scalar rounded once or twice moves every element by a unit at most)
FACTOR_UNITS = 2.0


def computed_in(call: FunctionCall, which: str = "computed") -> torch.dtype | None:
    """The half precision a call computed in (`computed`: the gradient it got from above is in
    its output's dtype — under --autocast a custom_fwd without cast_inputs computes in the
    dtype it is given, one with cast_inputs=torch.float32 in float32) or returned in (`any`:
    autograd casts a gradient to its argument's dtype, a bfloat16 activation's too), else
    None."""
    given = (*call.received, *call.returned) if which == "any" else call.received
    halves = [t.dtype for t in given if isinstance(t, torch.Tensor) and t.dtype in HALVES]
    return halves[0] if halves else None


def judged_at(call: FunctionCall, tol: Tolerance) -> Tolerance:
    """The tolerance a call is judged at: its half precision's where it computed in one (a
    bfloat16 backward's rounding is no culprit), the run's widened by a unit of it where only
    its answer was rounded to one."""
    low = computed_in(call)
    if low is not None:
        own = Tolerance.for_dtype(str(low).removeprefix("torch."))
        return own if own.rtol > tol.rtol else tol
    rounded = computed_in(call, "any")
    if rounded is None:
        return tol
    return replace(tol, rtol=max(tol.rtol, float(torch.finfo(rounded).eps)))


def factor(call: FunctionCall, compared: Mapping[str, tuple[relations.Arrays, int]],
            again: Callable[[], Mapping[str, tuple[relations.Arrays, int]]]
            ) -> tuple[str, relations.Relation, int] | None:
    """A half-precision call whose backward agrees at its precision's tolerance yet differs
    from its forward's derivative by a common factor no rounding makes (`common_factor`),
    the same factor again with a seeded random gradient from above (rule 4: a bottleneck's
    rounding — a saturated unit every element flows through — moves with the gradient, a
    half-precision path of the backward's own does not): the first such argument."""
    low = computed_in(call, "any")
    if low is None:
        return None
    beyond = FACTOR_UNITS * float(torch.finfo(low).eps)

    def judged(arrays: relations.Arrays) -> torch.Tensor:
        return (arrays.status == Status.OK.code) | (arrays.status == Status.MISMATCH.code)

    def fitted(arrays: relations.Arrays) -> float | None:
        at = judged(arrays)
        return relations.common_factor(arrays.autograd[at], arrays.reference[at], beyond)

    fresh: Mapping[str, tuple[relations.Arrays, int]] | None = None
    for name, (arrays, _) in compared.items():
        c = fitted(arrays)
        if c is None:
            continue
        fresh = again() if fresh is None else fresh
        other = fitted(fresh[name][0]) if name in fresh else None
        if other is None or abs(other - c) > relations.AGREES * abs(c - 1):
            continue
        count = int(judged(arrays).sum())
        text = (f"autograd ≈ {relations.number(c)} × the derivative at every element (a common "
                f"factor in {str(low).removeprefix('torch.')}, fitted on every other element, "
                "held on the rest and with another gradient from above: no rounding makes "
                "one)")
        return name, relations.Relation("factor", text, "", count, c), count
    return None
