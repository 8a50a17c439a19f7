"""The culprit, not only the place: each custom `autograd.Function` call on the failing run
checked in place — its backward's answer against finite differences of its own forward, on
the arguments it actually received and with the gradient it actually got from above — and the
wrong one named with its file and line and how it is wrong.

Where a Function's forward is flat (finite differences zero, no kink) and its backward is not,
that is its surrogate, judged by the run's own surrogate checks: never a culprit here. A
Function whose backward agrees on every call is not named, whatever else is wrong."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from gradscope.diagnose import partitions, relations
from gradscope.engines.base import Answer
from gradscope.engines.fd import FiniteDifferences
from gradscope.engines.fd.budget import sample_size
from gradscope.engines.fd.result import Estimate
from gradscope.features.inplace import precision, reach, saturated
from gradscope.features.inplace.calls import (
    FunctionCall,
    applied_values,
    backward_again,
    backward_of,
    joined,
    received_upstream,
    record,
)
from gradscope.features.inplace.custom_ops import registered, undeclared
from gradscope.features.inplace.hooks import HOOK_HINT, HookCheck, check_hooks
from gradscope.features.inplace.linearity import HOW, nonlinear
from gradscope.features.inplace.unseen import Unseen
from gradscope.report.model import Diagnostic
from gradscope.report.status import Status
from gradscope.rng import generator
from gradscope.targets.numbers import written
from gradscope.targets.oldstyle import forward_names
from gradscope.usercode import backward_location, place, returns
from gradscope.verdict.compare import Comparison, compare
from gradscope.verdict.tolerance import Tolerance

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
    # tolerance (`_factor`): what reach.py proves under --autocast
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
        fd = FiniteDifferences(_as_function(call, names), checked, elementwise=set(), eps=eps,
                               probe=True)
        v = received_upstream(call, fd.out)
        seen = _Seen()
        compared = {names[i]: _compared(fd, names[i], grads[i].double().reshape(
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
        compared = _another_upstream(call, names, fd, checked, tol, max_fd, sample, seed) \
            or compared
        wrong = next((n for n, (_, count) in compared.items() if count), None)
    factor = precision.factor(call, compared, lambda: _another_upstream(
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
    rel = _relation(call, names, fd, checked, wrong, compared, tol,
                    lambda: _another_upstream(call, names, fd, checked, tol, max_fd, sample,
                                              seed + 1))
    if rel is not None and rel.predicate is not None and not _predicted(
            rel.predicate, *(_elsewhere(call, names, checked, wrong, tol, eps, max_fd,
                                        sample, seed) or (None, None))):
        rel = None  # (rule 4: a partition by value that a fresh draw of values refutes)
    return (Wrong(call, wrong, rel, compared[wrong][1],
                  **kept(factor is not None and factor[0] == wrong)), elements, flat)


def _relation(call: FunctionCall, names: list[str], fd: FiniteDifferences,
              checked: Mapping[str, torch.Tensor], wrong: str,
              compared: Mapping[str, tuple[relations.Arrays, int]], tol: Tolerance,
              again: Callable[[], Mapping[str, tuple[relations.Arrays, int]]]
              ) -> relations.Relation | None:
    """How the wrong argument's answer relates to its derivative; a located rule only where
    `again` (a fresh gradient from above) finds the same (rule 4)."""
    arrays = {n: a for n, (a, _) in compared.items()}
    variables = {n: t for n, t in checked.items() if t.shape == checked[wrong].shape}
    sizes = relations.sizes_of(tuple(fd.out.shape), {n: tuple(t.shape)
                                                     for n, t in checked.items()})
    rel = relations.find(wrong, arrays[wrong], tol, sizes, arrays, None, variables,
                         written(call.cls))
    if rel is not None and relations.located(rel):  # (rule 4: a place held on a fresh draw)
        fresh = {n: a for n, (a, _) in again().items()}
        if wrong not in fresh or not relations.same_rule(relations.find(
                wrong, fresh[wrong], tol, sizes, fresh, None, variables, written(call.cls)),
                rel):
            return None
    return rel


def _elsewhere(call: FunctionCall, names: list[str], checked: Mapping[str, torch.Tensor],
               wrong: str, tol: Tolerance, eps: float, max_fd: int, sample: int, seed: int
               ) -> tuple[relations.Arrays, dict[str, torch.Tensor]] | None:
    """The call checked again at other values: its floating arguments moved by half their
    spread (seeded), a seeded random gradient from above; the comparison of `wrong` there and
    the moved values. None where the Function refuses them."""
    gen = generator(seed, ":in place, elsewhere")
    args, moved = list(call.args), {}
    for i, a in enumerate(call.args):
        if i < len(names) and names[i] in checked:
            x = checked[names[i]]
            spread = max(float(x.std()) if x.numel() > 1 else 1.0, 1e-3)
            noise = torch.randn(x.shape, generator=gen, dtype=torch.float64).to(x.device)
            args[i] = (x + 0.5 * spread * noise).to(a.dtype)
            moved[names[i]] = args[i].double()
    other = replace(call, args=tuple(args))
    try:
        fd = FiniteDifferences(_as_function(other, names), moved, elementwise=set(), eps=eps,
                               probe=True)
        v = torch.rand(fd.out.shape, generator=gen, dtype=torch.float64).mul_(2).sub_(1)
        v = v.to(fd.out.device)
        grads = backward_again(other, lambda out: v.reshape(out.shape).to(out.dtype), joined)
        at = names.index(wrong)
        if grads is None or grads[at] is None:
            return None
        arrays, _ = _compared(fd, wrong, grads[at].double().reshape(moved[wrong].shape), v, tol,
                              max_fd, sample, seed)
    except Exception:  # (the Function refuses those values: nothing predicted, nothing held)
        return None
    return arrays, moved


def _predicted(predicate: str, arrays: relations.Arrays | None,
               values: Mapping[str, torch.Tensor] | None) -> bool:
    """Whether the partition `predicate` holds at the values it was not fitted to: exactly
    the elements it names disagree there, among those judged."""
    if arrays is None or values is None:
        return False
    where = partitions.holds(predicate, values)
    if where is None or where.shape != arrays.status.shape:
        return False
    judged = (arrays.status == Status.OK.code) | (arrays.status == Status.MISMATCH.code)
    wrong = arrays.status == Status.MISMATCH.code
    return bool(judged.any()) and bool((where.to(wrong.device)[judged] == wrong[judged]).all())


def _blind(compared: Mapping[str, tuple[relations.Arrays, int]], tol: Tolerance) -> bool:
    """Whether the forward's VJP with the gradient the call got is zero within its error for
    every argument compared: a backward scaled or rolled would give zero too."""
    for arrays, _ in compared.values():
        ref, err = arrays.reference, arrays.error
        bound = tol.atol + (3 * err if err is not None else 0.0)
        if bool((ref.abs() > bound).nan_to_num(False).any()):
            return False
    return bool(compared)


def _another_upstream(call: FunctionCall, names: list[str], fd: FiniteDifferences,
                      checked: Mapping[str, torch.Tensor], tol: Tolerance, max_fd: int,
                      sample: int, seed: int) -> dict[str, tuple[relations.Arrays, int]]:
    """The call checked again with a seeded random gradient from above (where the one it got
    is `_blind`): its backward run on a fresh call with the recorded arguments, against the
    same finite differences (their VJP with the new gradient costs no evaluation). Empty
    where the Function refuses a second call or a backward."""
    v = torch.rand(fd.out.shape, generator=generator(seed, ":in place"), dtype=torch.float64)
    v = v.mul_(2).sub_(1).to(fd.out.device)
    grads = backward_again(call, lambda out: v.reshape(out.shape).to(out.dtype), joined)
    if grads is None:  # (the Function refuses: the gradient it got stays the only check)
        return {}
    try:
        return {names[i]: _compared(fd, names[i], g.double().reshape(checked[names[i]].shape),
                                    v, tol, max_fd, sample, seed)
                for i, g in enumerate(grads) if g is not None and names[i] in checked}
    except Exception:  # (its refinement refuses perturbed arguments: as above)
        return {}


@dataclass
class _Seen:
    """What the comparisons of one call saw besides their arrays: the arguments its forward
    never reads, and whether its forward was flat where its backward was not (a surrogate)."""

    names: list[str] = field(default_factory=list)
    surrogate: bool = False


def _compared(fd: FiniteDifferences, name: str, got: torch.Tensor, v: torch.Tensor,
              tol: Tolerance, max_fd: int, sample: int, seed: int,
              unread: _Seen | None = None) -> tuple[relations.Arrays, int]:
    """The backward's answer for `name` against finite differences of the forward, as
    relation arrays (a flat forward's elements, a surrogate's, counted as agreeing — and
    said in `unread`), and how many elements disagree. An argument the forward never reads
    (flat everywhere, moved by no value tried: the Function reaches what it stands for
    another way, a callable's parameter) is not compared at all, its name in `unread`."""
    def against(est: Estimate) -> tuple[torch.Tensor, torch.Tensor, Comparison, torch.Tensor]:
        values, error = est.vjp(v)
        cmp = compare(got, [Answer(values, error, est.kink, est.checked)], tol)
        return values, error, cmp, cmp.status == Status.MISMATCH.code

    count = sample_size(fd, name, max_fd, sample)
    est = fd.estimate(name) if count is None else fd.sampled(name, count, seed)
    values, error, cmp, mismatch = against(est)
    if bool(mismatch.any()) and est.points is not None:
        # a two-point difference carries a round-off bound only: where it disagrees, it is
        # extrapolated with an error estimate before anything is called wrong (a step that
        # is large beside small activations — 1e-4 against an RMSNorm input of 0.01 — has
        # a truncation error far above round-off), as the target's own comparison does
        est, _ = fd.refine(est, mismatch.reshape(est.points.shape))
        values, error, cmp, mismatch = against(est)
    flat = (~est.nonconstant(tol.atol) & ~est.kink).reshape(mismatch.shape)
    status = torch.where(mismatch & flat, torch.full_like(cmp.status, Status.OK.code),
                         cmp.status)
    if unread is not None and count is None and _unread(fd, name, flat, mismatch):
        unread.names.append(name)
        status = torch.full_like(cmp.status, Status.UNCHECKED.code)
    elif unread is not None and bool((mismatch & flat).any()):
        unread.surrogate = True
    return relations.Arrays(got, values, error, status), int((mismatch & ~flat).sum())


def _unread(fd: FiniteDifferences, name: str, flat: torch.Tensor, mismatch: torch.Tensor
            ) -> bool:
    """Whether the forward never reads the argument it was given, while backward returns a
    gradient for it: flat at every element, and no probed value of a few of them moves it
    (a step's surrogate moves somewhere: it is read)."""
    if not bool(flat.all()) or not bool(mismatch.any()):
        return False
    at = torch.nonzero(mismatch.reshape(-1)).reshape(-1)[:8]
    return not bool(fd.depends(name, at).any())


def _as_function(call: FunctionCall, names: list[str]) -> Callable[[Mapping[str, torch.Tensor]],
                                                             tuple[torch.Tensor, list]]:
    """The call's forward as a function of its checked arguments (the others as received),
    its tensor outputs flattened into one."""
    def fn(values: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, list]:
        args = [values.get(names[i], a) if isinstance(a, torch.Tensor) else a
                for i, a in enumerate(call.args)]
        with torch.no_grad():
            out = applied_values(call.cls, args, call.kwargs)
        return joined(out), []
    return fn


def named(cls: type, argument: str, relation: relations.Relation | None,
          count: int) -> Diagnostic:
    """The culprit diagnostic of a target that is itself the Function `cls`, from the
    relation its table already found (no second check: the table was it)."""
    return _diagnostic(ClassCheck(cls, 1, 0, (Wrong(None, argument, relation, count),)))
