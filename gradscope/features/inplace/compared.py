"""A custom Function's call compared with its own forward: its backward's answer per argument
against finite differences of the forward at the arguments it received (`compared_with`), with
the gradient it got or a seeded random one (`another_upstream`), and the rules a wrong call's
comparison draws tested where they were not fitted (rule 4): a located rule with a fresh
gradient (`relation`), a value partition at the arguments moved by half their spread
(`elsewhere`, `predicted`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

import torch

from gradscope.compare.elements import Comparison, compare
from gradscope.compare.tolerance import Tolerance
from gradscope.engines.base import Answer
from gradscope.engines.fd import FiniteDifferences
from gradscope.engines.fd.budget import sample_size
from gradscope.engines.fd.result import Estimate
from gradscope.explain import partitions, relations
from gradscope.features.inplace.calls import FunctionCall, applied_values, backward_again, joined
from gradscope.report.status import Status
from gradscope.rng import generator
from gradscope.targets.numbers import written


def relation(call: FunctionCall, names: list[str], fd: FiniteDifferences,
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


def elsewhere(call: FunctionCall, names: list[str], checked: Mapping[str, torch.Tensor],
               wrong: str, tol: Tolerance, eps: float, max_fd: int, sample: int, seed: int
               ) -> tuple[relations.Arrays, dict[str, torch.Tensor]] | None:
    """The call checked again at other values: its floating arguments moved by half their
    spread (seeded), a seeded random gradient from above; the comparison of `wrong` there and
    the moved values. None where the Function refuses them."""
    gen = generator(seed, ":in place, elsewhere")
    args, moved = list(call.args), {}
    for i, a in enumerate(call.args):
        if i < len(names) and names[i] in checked:
            args[i] = partitions.elsewhere(checked[names[i]], gen).to(a.dtype)
            moved[names[i]] = args[i].double()  # (differenced where backward is asked)
    other = replace(call, args=tuple(args))
    try:
        fd = FiniteDifferences(as_function(other, names), moved, elementwise=set(), eps=eps,
                               probe=True)
        v = torch.rand(fd.out.shape, generator=gen, dtype=torch.float64).mul_(2).sub_(1)
        v = v.to(fd.out.device)
        grads = backward_again(other, lambda out: v.reshape(out.shape).to(out.dtype), joined)
        at = names.index(wrong)
        if grads is None or grads[at] is None:
            return None
        arrays, _ = compared_with(fd, wrong, grads[at].double().reshape(moved[wrong].shape), v, tol,
                              max_fd, sample, seed)
    except Exception:  # (the Function refuses those values: nothing predicted, nothing held)
        return None
    return arrays, moved


def predicted(predicate: str, arrays: relations.Arrays | None,
               values: Mapping[str, torch.Tensor] | None) -> bool:
    """Whether the partition `predicate` holds at the values it was not fitted to: exactly
    the elements it names disagree there, among those judged."""
    return arrays is not None and values is not None \
        and partitions.predicts(predicate, values, arrays.status)


def another_upstream(call: FunctionCall, names: list[str], fd: FiniteDifferences,
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
        return {names[i]: compared_with(fd, names[i], g.double().reshape(checked[names[i]].shape),
                                    v, tol, max_fd, sample, seed)
                for i, g in enumerate(grads) if g is not None and names[i] in checked}
    except Exception:  # (its refinement refuses perturbed arguments: as above)
        return {}


@dataclass
class ComparedAlso:
    """What the comparisons of one call saw besides their arrays: the arguments its forward
    never reads, and whether its forward was flat where its backward was not (a surrogate)."""

    names: list[str] = field(default_factory=list)
    surrogate: bool = False


def compared_with(fd: FiniteDifferences, name: str, got: torch.Tensor, v: torch.Tensor,
              tol: Tolerance, max_fd: int, sample: int, seed: int,
              unread: ComparedAlso | None = None) -> tuple[relations.Arrays, int]:
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


def as_function(call: FunctionCall, names: list[str]) -> Callable[[Mapping[str, torch.Tensor]],
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
