"""A custom Function the drawn inputs saturate: its backward and its forward's derivative ~0
almost everywhere on every call (a steep sigmoid at a wide spread), so a wrong backward where
it is active goes unseen. `quiet` tells such a call; `active` exercises the Function where it
is active — its first call's arguments scaled down by 10, 100, 1000 (around zero, where a
steep relaxation's comparisons are undecided) until the call is no longer saturated — and
checks it there as every call is checked in place, with a seeded random gradient from above.

What it finds is the Function's, at arguments the target never gave it: by the first rule a
warning that names it (the `saturation` diagnostic says how it is wrong there), never a
failure of the target checked at its own inputs."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from gradscope.compare.tolerance import Tolerance
from gradscope.explain import relations
from gradscope.features.inplace.calls import FunctionCall, applied, backward_again, joined
from gradscope.features.inplace.linearity import HOW
from gradscope.report.model import Diagnostic
from gradscope.rng import generator

if TYPE_CHECKING:
    from gradscope.features.inplace.culprits import ClassCheck

SATURATED = 0.95  # a call is saturated where this share of its argument elements is ~0
SHRINKS = (0.1, 0.01, 0.001)  # the arguments' scale tried for the active region


@dataclass(frozen=True)
class Active:
    """The Function checked where it is active: its arguments scaled by `factor`, and the
    first argument its backward is wrong for there with how (`wrong`: a culprits.Wrong;
    None where it is right)."""

    factor: float
    wrong: Any = None


def quiet(compared: Mapping[str, tuple[relations.Arrays, int]], tol: Tolerance) -> bool:
    """Whether the call's backward and its forward's derivative were both ~0 (within atol) at
    SATURATED of the argument elements compared: the inputs put it where it does nothing, so
    a wrong gradient where it is active would go unseen."""
    still_count = total = 0
    for arrays, _ in compared.values():
        still = (arrays.autograd.abs() <= tol.atol) & (arrays.reference.abs() <= tol.atol)
        still_count += int(still.sum())
        total += still.numel()
    return total > 0 and still_count >= SATURATED * total


Checked = tuple[Any, int, bool]  # culprits._check's answer: (Wrong | None, elements, quiet)


def active(call: FunctionCall, check: Callable[[FunctionCall], Checked], seed: int
           ) -> Active | None:
    """The first scale of `call`'s arguments at which it is no longer saturated, checked
    there (None: none is, or the Function refuses the scaled arguments)."""
    for factor in SHRINKS:
        moved = _scaled(call, factor, seed)
        if moved is None:
            return None
        wrong, elements, flat = check(moved)
        if not elements:
            return None
        if not flat:
            return Active(factor, wrong)
    return None


def _scaled(call: FunctionCall, factor: float, seed: int) -> FunctionCall | None:
    """`call` with its floating arguments scaled by `factor`, its backward's answer to a
    seeded random gradient from above recorded as a call's is."""
    args = tuple(a * factor if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                 for a in call.args)
    moved = FunctionCall(call.cls, args, dict(call.kwargs), None)
    try:
        with torch.no_grad():
            out = joined(applied(call.cls, args, call.kwargs))
    except Exception:  # (the Function refuses these arguments: nothing to say)
        return None
    v = torch.rand(out.shape, generator=generator(seed, ":active"), dtype=torch.float64)
    v = v.mul_(2).sub_(1).to(out.device)
    returned = backward_again(moved, lambda o: v.reshape(o.shape).to(o.dtype), joined)
    if returned is None:
        return None
    moved.received = (v,)
    moved.returned = tuple(g for a, g in zip(args, returned, strict=True)
                           if isinstance(a, torch.Tensor))
    return moved


def diagnostics(checks: Sequence[ClassCheck]) -> list[Diagnostic]:
    """A `saturation` warning per Function class every checked call of which was saturated
    (and found no wrong backward): what the drawn inputs left unexercised, and how its
    backward is where it is active (saturated.py)."""
    return [Diagnostic(
        kind="saturation", op=f"{c.cls.__name__}.backward", where=c.where, inputs=[],
        count=c.calls,
        message=(f"{c.label}: on each of its {c.calls} call(s) its backward and its forward's "
                 f"derivative were ~0 at {SATURATED:.0%} of the elements or more: "
                 "the inputs saturate it, so a wrong gradient where it is active would go "
                 f"unseen{_active(c.active)}"),
        hint=("give inputs with --at that reach its active region (moderate values), or "
              "check the Function alone: gradscope check FILE:CLASS"),
        relation=rel.kind if rel else None, factor=rel.factor if rel else None)
        for c in checks if not c.wrong and c.calls
        and c.saturated == c.calls
        for rel in [c.active.wrong.relation if c.active and c.active.wrong else None]]


def _active(found: Active | None) -> str:
    if found is None:
        return ""
    where = f"; with its arguments scaled by {found.factor:g}, where it is active,"
    if found.wrong is None:
        return f"{where} its backward agrees with its forward"
    how = HOW.format(count=found.wrong.count) if found.wrong.nonlinear else \
        (found.wrong.relation.text if found.wrong.relation is not None
         else f"{found.wrong.count} element(s) disagree")
    return f"{where} its backward is wrong for its argument {found.wrong.argument}: {how}"
