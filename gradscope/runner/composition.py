"""The composition of a model checked at scale (docs/models.md, "Models at scale"): autograd's
gradient against finite differences along seeded random directions over every input and
parameter at once — four forwards each — with the chance of missing an error of a given size
stated. A direction whose stencil crosses a kink or jump (a relu, clamp or round switching
inside it) is tried again with smaller steps and, if it still crosses one, counts as not
compared: never as agreeing. A disagreement is drilled down the module tree — each module's
children projected alone, from the last in forward order back — to the tensor where wrong
gradients start (every tensor before a bug inherits it; those after it agree)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from gradscope.engines.fd import FiniteDifferences
from gradscope.errors import TargetError
from gradscope.rng import generator
from gradscope.runner.projections import judged

DIRECTIONS = 3  # seeded random directions over every element
SHRINK = 16.0  # a kinked stencil is tried again with steps this much smaller...
SHRINKS = 2  # ...this many times


@dataclass(frozen=True)
class Along:
    """vᵀJt by finite differences along one direction t over `names`, against (Jᵀv)·t from
    autograd, the slack the difference is allowed, and autograd's gradient norm over those
    tensors (what an error's size is measured against)."""

    names: tuple[str, ...]
    index: int
    difference: float
    slack: float
    norm: float
    kinked: bool = False  # the stencil crossed a kink at every step tried: not compared
    rejected: str = ""  # what the target raised along t: not compared

    @property
    def compared(self) -> bool:
        return not self.kinked and not self.rejected and math.isfinite(self.difference)

    @property
    def agrees(self) -> bool:
        return self.compared and self.difference <= self.slack

    def miss(self, relative: float) -> float:
        """The chance that an error e in autograd's gradient with |e| = relative·|g| goes
        unseen along a Gaussian t: e·t ~ N(0, |e|²) must stay within the slack."""
        if not self.compared:
            return 1.0
        size = relative * self.norm
        return 1.0 if size == 0 else math.erf(self.slack / (size * math.sqrt(2.0)))


@dataclass(frozen=True)
class Composition:
    """The projections over everything, and where a disagreement was drilled down to:
    `start`, the tensor whose own projection disagrees, reached down the module tree from the
    last module in forward order; `agreed`, the tensors whose projections agreed on the way;
    `drilled`, the steps taken."""

    projections: tuple[Along, ...]
    order: tuple[str, ...]
    start: str | None = None
    agreed: tuple[str, ...] = ()
    drilled: tuple[Along, ...] = ()

    @property
    def compared(self) -> int:
        return sum(p.compared for p in self.projections)

    @property
    def agrees(self) -> bool:
        return self.compared > 0 and all(p.agrees for p in self.projections if p.compared)

    def miss(self, relative: float) -> float:
        """The chance that every compared projection misses an error of that relative size
        (independent directions: the product)."""
        return math.prod(p.miss(relative) for p in self.projections)

    def covered(self) -> dict[str, bool | None]:
        """Per tensor: True where the projections that moved it agree, False where the
        drill-down placed a wrong gradient, None where nothing tells (no projection compared,
        or a tensor the drill-down never projected alone)."""
        if not self.compared:
            return dict.fromkeys(self.order)
        if self.agrees:
            return dict.fromkeys(self.order, True)
        out: dict[str, bool | None] = dict.fromkeys(self.order)
        out.update(dict.fromkeys(self.agreed, True))
        if self.start is not None:
            out[self.start] = False
        return out


@dataclass(frozen=True)
class _Side:
    """Autograd's side of every projection: the gradients, the upstream, each tensor's
    squared gradient norm (computed once, not per projection) and the tolerances."""

    grads: Mapping[str, torch.Tensor]
    v: torch.Tensor
    squares: Mapping[str, float]
    atol: float
    rtol: float


def composed(fd: FiniteDifferences, grads: Mapping[str, torch.Tensor], upstream: torch.Tensor,
             order: Sequence[str], atol: float, rtol: float, seed: int) -> Composition:
    """DIRECTIONS projections over every tensor in `order` (forward order), the first that
    disagrees drilled down."""
    side = _Side(grads, upstream.to(torch.float64),
                 {n: float(grads[n].double().pow(2).sum()) for n in order}, atol, rtol)
    # (each direction drawn when used, never all at once: one is a float32 copy of the model)
    found = tuple(_along(fd, side, _direction(fd, order, seed, k), tuple(order), k)
                  for k in range(DIRECTIONS))
    wrong = next((p for p in found if p.compared and not p.agrees), None)
    if wrong is None:
        return Composition(found, tuple(order))
    start, agreed, steps = _drilled(fd, side, _direction(fd, order, seed, wrong.index),
                                    tuple(order), wrong.index)
    return Composition(found, tuple(order), start, agreed, steps)


def _direction(fd: FiniteDifferences, names: Sequence[str], seed: int, k: int
               ) -> dict[str, torch.Tensor]:
    """A seeded Gaussian direction over every element of `names` (float32, each drawn from
    its own generator: the same tensor gets the same direction whatever else is checked)."""
    out = {}
    for name in names:
        x = fd.values[name]
        gen = generator(seed, f":compose:{name}:{k}")
        # (float32 draws are four times faster than float64 ones and as Gaussian; half the
        # memory while held)
        out[name] = torch.randn(x.shape, generator=gen, dtype=torch.float32).to(x.device)
    return out


def _along(fd: FiniteDifferences, side: _Side, t: Mapping[str, torch.Tensor],
           names: tuple[str, ...], index: int) -> Along:
    """One projection over `names`, its stencil shrunk while it crosses a kink."""
    moved = {n: t[n] for n in names}
    dot = spread = 0.0
    for n in names:  # (one temporary per tensor, never the whole model's)
        gt = torch.mul(side.grads[n].double(), moved[n])
        dot += float(gt.sum())
        spread += float(gt.abs_().sum())
    norm = math.sqrt(sum(side.squares[n] for n in names))
    shrink = 1.0
    for attempt in range(SHRINKS + 1):
        try:
            d = fd.directional(moved, shrink=shrink)
        except TargetError as exc:
            return Along(names, index, float("nan"), 0.0, norm, rejected=str(exc)[:200])
        difference, slack = judged(d, side.v, dot, spread, side.atol, side.rtol)
        kinked = bool(d.kink.any())
        if not kinked or attempt == SHRINKS:
            return Along(names, index, difference, slack, norm, kinked)
        shrink *= SHRINK
    raise AssertionError("unreachable")  # (the loop returns on its last attempt)


def _drilled(fd: FiniteDifferences, side: _Side, t: Mapping[str, torch.Tensor],
             order: tuple[str, ...], index: int
             ) -> tuple[str | None, tuple[str, ...], tuple[Along, ...]]:
    """Down the module tree from the root: the children of the module reached (submodules and
    its own tensors), projected alone from the last in forward order back, until one
    disagrees; then into it. Each child's projection is as sensitive as its own gradient
    allows (its slack is its own). Returns the tensor reached (None: a kink stopped the
    descent, or the children all agree alone), the tensors whose children's projections
    agreed on the way, and the steps."""
    members, depth, agreed, steps = tuple(order), 0, [], []
    while len(members) > 1:
        groups = _children(members, depth)
        if len(groups) == 1:  # one child only: a level that tells nothing
            depth += 1
            continue
        wrong = None
        for group in reversed(groups):
            p = _along(fd, side, t, group, index)
            steps.append(p)
            if not p.compared:
                return None, tuple(agreed), tuple(steps)
            if not p.agrees:
                wrong = group
                break
            agreed.extend(group)
        if wrong is None:
            return None, tuple(agreed), tuple(steps)
        members, depth = wrong, depth + 1
    return members[0], tuple(agreed), tuple(steps)


def _children(members: tuple[str, ...], depth: int) -> list[tuple[str, ...]]:
    """`members` grouped by their path's component at `depth` (`h.0.c_fc.weight` at depth 1:
    `0`), the groups in the order their first tensor comes."""
    groups: dict[str, list[str]] = {}
    for name in members:
        parts = name.split(".")
        key = parts[depth] if depth < len(parts) - 1 else f"\0{name}"  # a tensor: alone
        groups.setdefault(key, []).append(name)
    return [tuple(g) for g in groups.values()]


def coverage(found: Composition, total: int, compared: int, in_place: Sequence[Any]) -> str:
    """What a model checked at scale compared and how, in one sentence."""
    parts = [f"checked at scale: {compared:,} of {total:,} elements per element (a seeded "
             "sample)"]
    if found.compared:
        parts.append(f"all {total:,} by {found.compared} of {len(found.projections)} random "
                     "projections over every tensor at once (an error of 1% of the gradient's "
                     f"norm goes unseen by them with probability {found.miss(1e-2):.1g}, of "
                     f"0.1%: {found.miss(1e-3):.1g})")
    else:
        parts.append(f"none of the {len(found.projections)} projections over every tensor "
                     "could be compared")
    parts += [f"{c.label} per element in place ({c.calls} call(s), {c.elements:,} elements)"
              for c in in_place]
    return "; ".join(parts)
