"""Gradient hooks checked in place: a hook registered on a tensor during the forward
(`h.register_hook(fn)`) receives that tensor's gradient and may return another. A hook that
only looks (logging, keeping the gradient) returns it unchanged; one that changes it (clipping,
scaling, reversing) makes autograd differ from the derivative from that tensor on, by design
or by mistake. Each hook call's result is compared per element with what it was given, and a
hook that changed it is named with the file and line that registered it."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gradscope.compare.tolerance import Tolerance
from gradscope.explain import relations
from gradscope.features.inplace.calls import HookCall
from gradscope.report.status import MISMATCH, OK

HOOK_HINT = ("a gradient hook that returns another gradient makes autograd differ from the "
             "derivative from that tensor on: if that is intended (clipping, gradient "
             "reversal), declare it with --surrogate; if not, return None or the gradient "
             "unchanged")


@dataclass(frozen=True)
class HookWrong:
    """One hook call that changed the gradient it was given, and how."""

    relation: relations.Relation | None
    count: int


@dataclass(frozen=True)
class HookCheck:
    """One registration site of gradient hooks, checked on every call backward made of it:
    how many calls, over how many gradient elements, and the calls that changed the gradient."""

    name: str
    where: str
    calls: int
    elements: int
    wrong: tuple[HookWrong, ...]

    @property
    def label(self) -> str:
        return f"gradient hook {self.name}" + (f" ({self.where})" if self.where else "")


def check_hooks(hooks: list[HookCall], tol: Tolerance) -> list[HookCheck]:
    """The hooks backward reached, grouped by where they were registered."""
    by_site: dict[tuple[str, str], list[HookCall]] = {}
    for h in hooks:
        by_site.setdefault((h.name, h.where), []).append(h)
    out = []
    for (name, where), mine in by_site.items():
        results = [_changed(h, tol) for h in mine]
        out.append(HookCheck(name, where, len(mine), sum(h.received.numel() for h in mine
                                                          if h.received is not None),
                             tuple(w for w in results if w is not None)))
    return out


def _changed(call: HookCall, tol: Tolerance) -> HookWrong | None:
    """How the hook's result differs from what it was given (None: it left it unchanged)."""
    given = call.received
    if given is None or call.returned is None:
        return None
    # (autograd refuses a hook's result of another shape: backward raised before this)
    got, ref = call.returned.double(), given.double()
    wrong = ~torch.isclose(got, ref, rtol=tol.rtol, atol=tol.atol, equal_nan=True)
    if not bool(wrong.any()):
        return None
    status = torch.where(wrong, MISMATCH, OK).to(torch.int8)
    arrays = relations.Arrays(got, ref, None, status)
    sizes = relations.sizes_of(tuple(ref.shape), {"the gradient": tuple(ref.shape)})
    return HookWrong(relations.find("the gradient", arrays, tol, sizes), int(wrong.sum()))
