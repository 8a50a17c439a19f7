"""Custom Functions of distributed code checked in place across ranks (--nproc). Each rank
records its custom Function calls in one forward and backward (the in-place check's own
recorder, run on the rank); then every rank calls each recorded Function's forward again at
once — so a collective inside it matches — with one argument moved along a seeded direction,
and the difference quotient of the Function across ranks is compared with what its backward
returned.

Across ranks a Function's output counts once where it and the gradient it received are the same
on every rank (a region's reduced output), else each rank's output is its own part and they are
summed (a copy into a parallel region, whose ranks' gradients differ). An argument the same on
every rank is one quantity, moved on every rank at once, and each rank's backward must return
the whole derivative; one that differs is each rank's own, moved on its rank alone.

It explains and never decides (the first rule): it runs only where the target's own evidence
already fails, and names the Function whose backward is wrong there — its `def` line, the
argument, the ranks, and how (each rank's own part: an all-reduce missing; the world size too
many or too few: reduced twice, a mean for a sum; one rank only: a wrong split)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from gradscope.features.base import Context, Diagnosis, Feature
from gradscope.features.inplace.calls import record
from gradscope.report.model import Diagnostic
from gradscope.rng import generator


@dataclass(frozen=True)
class Found:
    """A Function call whose backward departs from its cross-rank derivative."""

    name: str
    where: str
    argument: str  # forward's parameter name (its position where it has none)
    how: str
    hint: str


class Collectives(Feature[None]):
    name = "collectives"

    def diagnose(self, ctx: Context, verdict: Any, said: Any) -> Diagnosis:
        target, back = ctx.prepared.target, ctx.evidence.backward
        ranks = target.ranks()
        if ranks is None or not verdict.failures or back.grads is None:
            return Diagnosis()
        seen = ranks.record(ctx.prepared.bound.cast, back.upstream, record)
        failing = [n for n, s in verdict.statuses.items() if s.fails] or list(target.names)
        found = [f for k in range(min(len(s) for s in seen))
                 for f in _checked(ctx, seen, k)]
        return Diagnosis(tuple(_diagnostic(f, failing) for f in found))


def _checked(ctx: Context, seen: list[list[Any]], k: int) -> list[Found]:
    """Call k (the same Function on every rank) checked for each floating argument its
    backward returned a gradient for."""
    calls = [s[k] for s in seen]
    if len({c.name for c in calls}) > 1:
        return []  # the ranks' forwards took different paths: nothing to line up
    out = []
    for i, arg in enumerate(calls[0].args):
        if arg is None or not arg.is_floating_point() or any(
                i >= len(c.returned) or c.returned[i] is None or c.args[i] is None
                for c in calls):
            continue
        found = _argument(ctx, calls, k, i)
        if found is not None:
            out.append(found)
    return out


def _argument(ctx: Context, calls: Sequence[Any], k: int, i: int) -> Found | None:
    from gradscope.targets.distributed.target import same  # (only distributed runs get here)

    target, world = ctx.prepared.target.ranks(), len(calls)
    assert target is not None  # (only a target across ranks records calls)
    seed = ctx.prepared.options.seed
    args = [c.args[i] for c in calls]
    replicated = all(same(args[0], a) for a in args[1:])
    base = target.probe(k, i, [torch.zeros_like(a) for a in args], 0.0)
    once = all(_all_same(o, base[0]) for o in base[1:]) and all(
        _all_same(c.received, calls[0].received) for c in calls[1:])
    count = 1 / world if once else 1.0
    h = torch.finfo(args[0].dtype).eps ** (1 / 3) * max(1.0, float(args[0].abs().max()))
    tol = ctx.evidence.tol
    if replicated:  # one quantity: every rank's backward returns the whole derivative
        d = torch.randn(args[0].shape, generator=generator(seed, f":collective:{k}:{i}"),
                        dtype=torch.float64).to(args[0])
        fd, err, _ = _quotient(target, calls, k, i, [d] * world, h, count)
        returned = [float((c.returned[i].double() * d.double()).sum()) for c in calls]
        wrong = [r for r, b in enumerate(returned) if not _close(b, fd, err, tol)]
        if not wrong:
            return None
        how, hint = _replicated_how(returned, fd, err, tol, wrong, world)
    else:  # each rank's own: moved on its rank alone, its backward its own part
        wrong, ratios, own = [], [], []
        for r in range(world):
            d = torch.randn(args[r].shape, generator=generator(seed, f":collective:{k}:{i}:{r}"),
                            dtype=torch.float64).to(args[r])
            dirs = [d if q == r else torch.zeros_like(args[q]) for q in range(world)]
            fd, err, terms = _quotient(target, calls, k, i, dirs, h, count)
            b = float((calls[r].returned[i].double() * d.double()).sum())
            if not _close(b, fd, err, tol):
                wrong.append(r)
                ratios.append(b / fd if fd else float("nan"))
                own.append(_close(b, terms[r], err, tol))
        if not wrong:
            return None
        how, hint = _sharded_how(wrong, ratios, world, all(own) and len(wrong) == world)
    names = getattr(calls[0], "arguments", ())
    return Found(calls[0].name, calls[0].where, names[i] if i < len(names) and names[i]
                 else f"at position {i}", how, hint)


def _quotient(target: Any, calls: Sequence[Any], k: int, i: int, dirs: list[torch.Tensor],
              h: float, count: float) -> tuple[float, float, list[float]]:
    """The Function's directional derivative across ranks (each rank's outputs weighed by the
    gradient they received, summed, × `count`) at steps h and h/2, their difference (its
    error), and each rank's own term of it (what a backward without reduction returns)."""
    def at(step: float) -> list[float]:
        plus, minus = target.probe(k, i, dirs, step), target.probe(k, i, dirs, -step)
        terms = []
        for call, p, m in zip(calls, plus, minus, strict=True):
            terms.append(count * sum(
                float((g.double() * (a.double() - b.double())).sum()) / (2 * step)
                for g, a, b in zip(call.received, p, m, strict=False)
                if g is not None and a is not None and b is not None))
        return terms

    coarse, fine = at(h), at(h / 2)
    return sum(fine), abs(sum(coarse) - sum(fine)), fine


def _close(b: float, fd: float, err: float, tol: Any) -> bool:
    return abs(b - fd) <= 10 * err + 10 * tol.rtol * max(abs(b), abs(fd)) + tol.atol


def _replicated_how(returned: list[float], fd: float, err: float, tol: Any, wrong: list[int],
                    world: int) -> tuple[str, str]:
    alike = all(_close(b, returned[0], err, tol) for b in returned[1:])
    if not alike and _close(sum(returned), fd, err * world, tol):
        return ("each rank returns only its own part of the gradient (their sum is the "
                "derivative): an all-reduce missing in backward",
                "all-reduce the gradient in this backward (dist.all_reduce(grad)), as the "
                "Function hands a tensor every rank uses to each rank's part of the work")
    ratios = [returned[r] / fd if fd else float("nan") for r in wrong]
    if len(wrong) < world:
        right = [r for r in range(world) if r not in wrong]
        return (f"wrong on rank(s) {', '.join(map(str, wrong))} only (right on "
                f"{', '.join(map(str, right))}): {ratios[0]:.4g} × the derivative there",
                "a rank-dependent branch or scale in backward: every rank must return the "
                "same gradient for a tensor they share")
    return _factor_how(ratios[0], world)


def _sharded_how(wrong: list[int], ratios: list[float], world: int, own: bool
                 ) -> tuple[str, str]:
    if own:
        return ("each rank returns the gradient of its own output only, where every rank's "
                "output depends on its part: a reduction missing in backward (a reduce-scatter "
                "or all-reduce of the gradient)",
                "reduce the gradient over the ranks before taking this rank's part, as the "
                "forward gathered this rank's part into every rank's output")
    if len(wrong) < world:
        ranks = ", ".join(map(str, wrong))
        return (f"wrong for the part of rank(s) {ranks} (of {world}), right for the others: "
                "a wrong split in backward",
                "check which slice of the gradient each rank keeps (rank and world size in "
                "the indices)")
    return _factor_how(ratios[0], world)


def _factor_how(ratio: float, world: int) -> tuple[str, str]:
    if abs(ratio - world) <= 1e-3 * world:
        return (f"{world} × the derivative on every rank ({world}, the world size): reduced "
                "once too often (an all-reduce twice, or a sum of identical gradients)",
                "all-reduce once, where the gradient is each rank's part")
    if abs(ratio - 1 / world) <= 1e-3 / world:
        return (f"1/{world} × the derivative on every rank ({world}, the world size): a mean "
                "where the sum belongs (ReduceOp.AVG or a division by the world size)",
                "sum the ranks' parts (ReduceOp.SUM): each holds a part of one gradient")
    # (one seeded direction: a ratio read there, not a factor shown to hold elsewhere)
    return (f"its backward departs from the derivative on every rank (along a seeded "
            f"direction it gives {ratio:.4g} × the forward's difference quotient)",
            "compare the backward's formula with the forward's derivative across ranks")


def _diagnostic(found: Found, inputs: list[str]) -> Diagnostic:
    label = f"{found.name}.backward"
    return Diagnostic(
        kind="culprit", op=label, where=found.where, inputs=inputs, count=1,
        message=f"{label} ({found.where}) is wrong across ranks for its argument "
                f"{found.argument}: {found.how}",
        hint=found.hint, summary=f"{label} ({found.where}): {found.how}")


def _all_same(a: Sequence[torch.Tensor | None], b: Sequence[torch.Tensor | None]) -> bool:
    """Two ranks' outputs (or received gradients) of a call, each the same up to round-off."""
    from gradscope.targets.distributed.target import same  # (only distributed runs get here)

    return len(a) == len(b) and all(
        (x is None) == (y is None) and (x is None or same(x, y)) for x, y in zip(a, b,
                                                                               strict=True))


FEATURE = Collectives()
