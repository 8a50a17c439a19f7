"""The culprit, not only the place: each custom `autograd.Function` call on the failing run
checked in place — its backward's answer against finite differences of its own forward, on
the arguments it actually received and with the gradient it actually got from above — and the
wrong one named with its file and line and how it is wrong.

Where a Function's forward is flat (finite differences zero, no kink) and its backward is not,
that is its surrogate, judged by the run's own surrogate checks: never a culprit here. A
Function whose backward agrees on every call is not named, whatever else is wrong."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from gradscope.compare.tolerance import Tolerance
from gradscope.engines.fd import FiniteDifferences
from gradscope.explain import relations
from gradscope.features.inplace import precision, reach, saturated
from gradscope.features.inplace.calls import (
    FunctionCall,
    backward_of,
    joined,
    received_upstream,
    record,
)
from gradscope.features.inplace.compared import (
    ComparedAlso,
    another_upstream,
    as_function,
    compared_with,
    elsewhere,
    predicted,
)
from gradscope.features.inplace.compared import relation as rule_held
from gradscope.features.inplace.custom_ops import registered, undeclared
from gradscope.features.inplace.hooks import HOOK_HINT, HookCheck, check_hooks
from gradscope.features.inplace.linearity import HOW, nonlinear
from gradscope.features.inplace.unseen import Unseen
from gradscope.report.model import Diagnostic
from gradscope.report.status import Status
from gradscope.targets.oldstyle import forward_names
from gradscope.usercode import backward_location, place, returns

HINT = ("checked in place, on the arguments this call received and the gradient it got from "
        "above (and a seeded random one): fix this backward first, the mismatches of the "
        "inputs follow from it")


@dataclass(frozen=True)
class Wrong:
    """One call whose backward disagrees: the argument, and how."""

    call: FunctionCall | None  # (None: the target itself is the call)
    argument: str
    relation: relations.Relation | None
    count: int
    nonlinear: bool = False  # its backward is not linear in grad_output (linearity.py)
    index: int = 0  # the call's place among its class's calls
    names: tuple[str, ...] = ()  # the forward's argument names
    # per argument: its derivative's VJP − its backward's, with the gradient it got (None:
    # not known at every element; reach.py)
    departure: reach.Departure | None = None
    # found as a common factor of a half-precision call's answer, within its precision's
    # tolerance (`precision.factor`): what reach.py proves under --autocast
    systematic: bool = False


@dataclass(frozen=True)
class ClassCheck:
    """One custom Function class checked in place: on how many calls, over how many argument
    elements, and the calls whose backward disagrees."""

    cls: type
    calls: int
    elements: int
    wrong: tuple[Wrong, ...]
    saturated: int = 0  # calls whose backward and derivative were ~0 almost everywhere
    # where every call was: its first call's arguments scaled by `factor` into its active
    # region, and how its backward is wrong there (saturated.py)
    active: saturated.Active | None = None
    written: tuple[str, ...] = ()  # a custom op's arguments written, its schema silent
    unread: tuple[str, ...] = ()  # arguments its forward never reads (not compared)
    # (unread argument, the target's input passed as it whose only way into the gradient is
    # this Function's node): that input's gradient is this backward's answer alone
    sole: tuple[tuple[str, str], ...] = ()
    # whether some call's forward was flat where its backward passed gradient on: the
    # surrogate the run's surrogate checks judge is this Function's
    surrogate: bool = False

    @property
    def where(self) -> str:
        """Where the wrong backward is: `file.py:LINE`, or a C++ kernel's op name."""
        op = registered(self.cls)
        if op is not None:
            return op.where or (op.op if op.dispatcher else "")
        return backward_location(self.cls) or ""

    @property
    def label(self) -> str:
        op = registered(self.cls)
        if op is not None:
            return op.label + (f" ({op.where})" if op.where else "")
        where = self.where
        return f"{self.cls.__name__}.backward" + (f" ({where})" if where else "")


def check_in_place(forward: Callable[[Mapping[str, torch.Tensor]], torch.Tensor],
                   values: Mapping[str, torch.Tensor], upstream: torch.Tensor, tol: Tolerance,
                   eps: float, max_fd: int, sample: int, seed: int
                   ) -> list[ClassCheck | HookCheck]:
    """Every custom Function class and every gradient hook on the run, each call checked in
    place (one watched forward and backward records them all)."""
    return checked_in_place(forward, values, upstream, tol, eps, max_fd, sample, seed)[0]


def checked_in_place(forward: Callable[[Mapping[str, torch.Tensor]], torch.Tensor],
                     values: Mapping[str, torch.Tensor], upstream: torch.Tensor,
                     tol: Tolerance, eps: float, max_fd: int, sample: int, seed: int
                     ) -> tuple[list[ClassCheck | HookCheck], tuple[Unseen, ...]]:
    """`check_in_place`'s checks, and the in-place changes of saved tensors no version check
    saw in the same watched forward (unseen.py)."""
    recorded = record(forward, values, upstream)
    return ([*_classes(recorded.calls, tol, eps, max_fd, sample, seed),
             *check_hooks(recorded.hooks, tol)], recorded.changed)


def _classes(calls: list[FunctionCall], tol: Tolerance, eps: float, max_fd: int,
             sample: int, seed: int) -> list[ClassCheck]:
    by_class: dict[type, list[FunctionCall]] = {}
    for call in calls:
        by_class.setdefault(call.cls, []).append(call)
    out = []
    for cls, mine in by_class.items():
        results = [_check(c, k, precision.judged_at(c, tol), eps, max_fd, sample, seed)
                   for k, c in enumerate(mine)]
        quiet = all(flat and w is None for w, _, flat in results)
        active = saturated.active(mine[0], lambda c: _check(c, 0, tol, eps, max_fd, sample,
                                                            seed), seed) if quiet else None
        op = registered(cls)
        written = undeclared(op, {argument_names(c)[i] for c in mine
                                  for i in c.extra.get("written", ())}) if op else ()
        unread = tuple(dict.fromkeys(n for c in mine for n in c.extra.get("unread", ())))
        sole = tuple(dict.fromkeys((argument_names(c)[i], name) for c in mine
                                   for i, name in c.extra.get("sole", {}).items()
                                   if argument_names(c)[i] in unread))
        out.append(ClassCheck(cls, len(mine), sum(n for _, n, _ in results),
                              tuple(w for w, _, _ in results if w is not None),
                              sum(1 for *_, flat in results if flat), written=written,
                              active=active, unread=unread, sole=sole,
                              surrogate=any(c.extra.get("surrogate") for c in mine)))
    return out


def find(forward: Callable[[Mapping[str, torch.Tensor]], torch.Tensor],
         values: Mapping[str, torch.Tensor], upstream: torch.Tensor, tol: Tolerance,
         eps: float, max_fd: int, sample: int, seed: int) -> list[Diagnostic]:
    """A `culprit` diagnostic per Function class whose backward is wrong on some call."""
    calls = record(forward, values, upstream).calls
    return diagnostics(_classes(calls, tol, eps, max_fd, sample, seed))


def diagnostics(checks: Sequence[ClassCheck | HookCheck]) -> list[Diagnostic]:
    """The culprit diagnostics of the classes checked in place that are wrong, and of the
    gradient hooks that changed a gradient."""
    return [_diagnostic(c) if isinstance(c, ClassCheck) else _hook_diagnostic(c)
            for c in checks if c.wrong]


def _diagnostic(check: ClassCheck) -> Diagnostic:
    first = check.wrong[0]
    how = HOW.format(count=first.count) if first.nonlinear else \
        _how(first.relation, f"{first.count} element(s) disagree")
    reading = f": {first.relation.reading}" if first.relation and first.relation.reading else ""
    at = _returning(check, first.call)
    return _culprit(check, f" is wrong for its argument {first.argument}{at}",
                    f", for its argument {first.argument}{at}", how, reading, [first.argument],
                    HINT)


def _returning(check: ClassCheck, call: FunctionCall | None) -> str:
    """' (returning at file.py:14)' — in a notebook ' (returning at Cell In[5], line 14)' —
    where the backward has several returns and the wrong call left through one of them
    (calls.returns_seen), else ''."""
    line = call.extra.get("returned_at") if call is not None else None
    backward = backward_of(check.cls)
    if line is None or backward is None or registered(check.cls) is not None \
            or returns(backward) < 2:
        return ""
    return f" (returning at {place(backward.__code__.co_filename, line)})"


def _hook_diagnostic(check: HookCheck) -> Diagnostic:
    first = check.wrong[0]
    how = _how(first.relation, f"{first.count} element(s) differ").replace(
        "autograd", "what it returns").replace("the derivative", "what it was given")
    said = " changes the gradient it is given"
    return _culprit(check, said, said, how, "", [], HOOK_HINT)


def _how(relation: relations.Relation | None, otherwise: str) -> str:
    return relation.text if relation is not None else otherwise


def _culprit(check: ClassCheck | HookCheck, said: str, summary: str, how: str, reading: str,
             inputs: list[str], hint: str) -> Diagnostic:
    """The culprit diagnostic of a Function class or hook checked in place: `said` of it in
    the message, `summary` in the headline, the relation of its first wrong call."""
    relation = check.wrong[0].relation
    calls = f" in {len(check.wrong)} of {check.calls} calls" if check.calls > 1 else ""
    return Diagnostic(
        kind="culprit", op=check.label, where=check.where, inputs=inputs,
        count=sum(w.count for w in check.wrong),
        message=f"{check.label}{said}{calls}: {how}{reading}", hint=hint,
        relation=relation.kind if relation else None,
        factor=relation.factor if relation else None, summary=f"{check.label}{summary}: {how}")


def argument_names(call: FunctionCall) -> list[str]:
    """The names of the forward's arguments, as its signature gives them."""
    op = registered(call.cls)
    params = list(op.arguments) if op is not None and op.arguments else \
        forward_names(call.cls)
    return [params[i] if i < len(params) else f"input{i}" for i in range(len(call.args))]


def _check(call: FunctionCall, index: int, tol: Tolerance, eps: float, max_fd: int,
           sample: int, seed: int) -> tuple[Wrong | None, int, bool]:
    """The first argument of `call` (the index-th of its class) where its backward disagrees
    with its forward, how many argument elements were compared (0: the call could not be
    checked), and whether the call was saturated (`saturated.quiet`)."""
    names = argument_names(call)
    tensors = [i for i, a in enumerate(call.args) if isinstance(a, torch.Tensor)]
    grads = dict(zip(tensors, call.returned, strict=False))
    checked = {names[i]: call.args[i].double() for i in tensors
               if grads.get(i) is not None and call.args[i].is_floating_point()}
    if not checked:
        return None, 0, False
    try:
        fd = FiniteDifferences(as_function(call, names), checked, elementwise=set(), eps=eps,
                               probe=True)
        v = received_upstream(call, fd.out)
        seen = ComparedAlso()
        compared = {names[i]: compared_with(fd, names[i], grads[i].double().reshape(
            checked[names[i]].shape), v, tol, max_fd, sample, seed, seen)
                    for i in tensors if names[i] in checked}
        call.extra["surrogate"] = seen.surrogate
        call.extra["unread"] = tuple(seen.names)
    except Exception:  # the Function refuses perturbed arguments: this call tells nothing
        return None, 0, False
    elements = sum(int(a.status.ne(Status.UNCHECKED.code).sum()) for a, _ in compared.values())
    flat = saturated.quiet(compared, tol)
    received = {n: a for n, (a, _) in compared.items()}
    wrong = next((n for n, (_, count) in compared.items() if count), None)
    if wrong is None and _blind(compared, tol):  # (the gradient it got shows nothing:
        # sparsemax's rows sum to one, so an upstream of ones has a zero VJP whatever
        # backward scales)
        compared = another_upstream(call, names, fd, checked, tol, max_fd, sample, seed) \
            or compared
        wrong = next((n for n, (_, count) in compared.items() if count), None)
    factor = precision.factor(call, compared, lambda: another_upstream(
        call, names, fd, checked, tol, max_fd, sample, seed + 2))

    def kept(systematic: bool = False) -> dict[str, Any]:  # (only a wrong call's: a forward
        # and backward more)
        return {"index": index, "names": tuple(names), "systematic": systematic,
                "departure": reach.departure(call, names, checked, v, received, tol,
                                             every=systematic)}

    if wrong is None and factor is not None:
        return Wrong(call, factor[0], factor[1], factor[2], **kept(True)), elements, flat
    if wrong is None:
        off = nonlinear(call.cls, tuple(call.args), dict(call.kwargs), names, joined, tol, seed)
        return (Wrong(call, off.argument, None, off.count, nonlinear=True, **kept())
                if off is not None else None), elements, flat
    rel = rule_held(call, names, fd, checked, wrong, compared, tol,
                    lambda: another_upstream(call, names, fd, checked, tol, max_fd, sample,
                                              seed + 1))
    if rel is not None and rel.predicate is not None and not predicted(
            rel.predicate, *(elsewhere(call, names, checked, wrong, tol, eps, max_fd,
                                        sample, seed) or (None, None))):
        rel = None  # (rule 4: a partition by value that a fresh draw of values refutes)
    return (Wrong(call, wrong, rel, compared[wrong][1],
                  **kept(factor is not None and factor[0] == wrong)), elements, flat)


def _blind(compared: Mapping[str, tuple[relations.Arrays, int]], tol: Tolerance) -> bool:
    """Whether the forward's VJP with the gradient the call got is zero within its error for
    every argument compared: a backward scaled or rolled would give zero too."""
    for arrays, _ in compared.values():
        ref, err = arrays.reference, arrays.error
        bound = tol.atol + (3 * err if err is not None else 0.0)
        if bool((ref.abs() > bound).nan_to_num(False).any()):
            return False
    return bool(compared)


def named(cls: type, argument: str, relation: relations.Relation | None,
          count: int) -> Diagnostic:
    """The culprit diagnostic of a target that is itself the Function `cls`, from the
    relation its table already found (no second check: the table was it)."""
    return _diagnostic(ClassCheck(cls, 1, 0, (Wrong(None, argument, relation, count),)))
