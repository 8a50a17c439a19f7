"""Projections: autograd's gradient against finite differences along seeded random directions
t — vᵀ(J·t) by finite differences beside (Jᵀv)·t from autograd — so that an element a sample
missed still shows. Two uses, one idea (`Projection`):

* a sampled input's projections over all its elements (PROJECTIONS of them);
* a model checked at scale (docs/models.md, "Models at scale"): DIRECTIONS projections over
  every input and parameter at once — four forwards each — with the chance of missing an error
  of a given size stated. A direction whose stencil crosses a kink or jump (a relu, clamp or
  round switching inside it) is tried again with smaller steps and, if it still crosses one,
  counts as not compared: never as agreeing. A disagreement is drilled down the module tree —
  each module's children projected alone, from the last in forward order back — to the tensor
  where wrong gradients start (every tensor before a bug inherits it; those after agree).

Both are evidence about the target: a projection that disagrees fails the run. One that agrees
only against autograd with torch's documented departures undone (the departures feature
re-runs them) is that departure, excused. (One module for both: the drill-down, the checks and
the coverage sentence share `Projection` and `Composition`; split, they were an import cycle.)"""

# Long: one analysis — the per-input projections and a model's composition share `Projection`,
# the judging of a projection and the coverage sentence; split, they were an import cycle.
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import torch

from gradscope.compare.tolerance import Tolerance
from gradscope.engines.fd import FiniteDifferences
from gradscope.engines.fd.batcher import rejection
from gradscope.engines.fd.result import Directional
from gradscope.errors import TargetError
from gradscope.evidence.backward import Backward
from gradscope.evidence.prepare import Prepared
from gradscope.evidence.references import PROJECTIONS, Finite
from gradscope.features import surrogates
from gradscope.features.base import Context, Feature, Interim, later
from gradscope.report.model import NamedCheck
from gradscope.report.modules import TOGETHER, in_forward_order
from gradscope.report.status import Status
from gradscope.rng import generator
from gradscope.tensors import weighted

DIRECTIONS = 3  # seeded random directions over every element of a model at scale
SHRINK = 16.0  # a kinked stencil is tried again with steps this much smaller...
SHRINKS = 2  # ...this many times
# elements multiplied in float64 at a time: 16 MB temporaries, below glibc's largest mmap
# threshold (32 MB), so each block reuses the last one's pages instead of faulting in new ones
BLOCK = 1 << 21
HALF_FROM = 1 << 26  # elements past which a direction is held in float16
Z_SIGMA = 6.0  # autograd's tolerated error along a random direction, in standard deviations


@dataclass(frozen=True)
class Projection:
    """vᵀJt by finite differences along one direction t over `names`, against (Jᵀv)·t from
    autograd, the slack the difference is allowed, and autograd's gradient norm over those
    tensors (what an error's size is measured against)."""

    names: tuple[str, ...]
    index: int
    difference: float
    slack: float
    norm: float = 0.0
    kinked: bool = False  # the stencil crossed a kink (at every step tried): not compared
    rejected: str = ""  # what the target raised along t: not compared
    elements: int = 0

    @property
    def compared(self) -> bool:
        return not self.kinked and not self.rejected and math.isfinite(self.difference)

    @property
    def agrees(self) -> bool:
        return self.compared and self.difference <= self.slack

    def check(self, label: str, at: str) -> NamedCheck:
        """Its named check (`at`: the tensor a disagreement is placed at)."""
        if not self.compared:
            why = self.rejected or "its stencil crossed a kink or jump at every step tried"
            return NamedCheck(f"{label}: not compared ({why})", Status.NOT_RUN)
        word = Status.OK if self.agrees else Status.MISMATCH
        return NamedCheck(label, word, self.difference, 0 if self.agrees else 1,
                          {} if self.agrees else {at: word})

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

    projections: tuple[Projection, ...]
    order: tuple[str, ...]
    start: str | None = None
    agreed: tuple[str, ...] = ()
    drilled: tuple[Projection, ...] = ()

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
class ProjectionFacts:
    """The projections of each sampled input, or a model at scale's composition."""

    projections: tuple[Projection, ...] = ()
    composition: Composition | None = None


# ------------------------------------------------------------------ the feature
class Projections(Feature["ProjectionFacts"]):
    name = "projections"
    # what was compared and how, where not every element got its own comparison (a model
    # checked at scale: per element by sample, by projections, custom Functions in place)
    fields: ClassVar[Mapping[str, Any]] = {"coverage": ""}
    reads = (surrogates, later("inplace"), later("departures"))

    def facts(self, ctx: Context) -> ProjectionFacts | None:
        evidence = ctx.evidence
        finite = evidence.finite
        if finite is None or finite.fd is None or evidence.backward.grads is None:
            return None
        if finite.scale:
            return ProjectionFacts(composition=composed_over(ctx.prepared, evidence.backward,
                                                             finite, evidence.tol))
        return ProjectionFacts(projected(ctx.prepared, evidence.backward, finite,
                                         evidence.tol))

    def statuses(self, ctx: Context, statuses: Mapping[str, Status]
                 ) -> tuple[dict[str, Status], dict[str, str]]:
        """A model at scale: a tensor whose elements were not sampled takes its status from
        the projections (ok where they agree, inconclusive where nothing tells); the one the
        drill-down placed a wrong gradient at is a mismatch whatever its sample said."""
        found, finite = judged_by(ctx), ctx.evidence.finite
        out = dict(statuses)
        if found is None or finite is None:
            return out, {}
        covered = found.covered()
        for name, ok in covered.items():
            if ok is False:
                out[name] = Status.MISMATCH
            elif name in finite.projected_only:
                out[name] = Status.OK if ok else Status.INCONCLUSIVE
        why = (f"{TOGETHER}: the drill-down placed the wrong "
               f"gradient at {found.start} and did not reach this tensor alone" if found.start
               else "no projection over it could be compared alone (each crossed a kink at "
               "every step, the target rejected its points, or its module's children agreed "
               "alone)")
        return out, {n: why for n, ok in covered.items()
                     if ok is None and n in finite.projected_only}

    def checks(self, ctx: Context, decided: Interim) -> list[NamedCheck]:
        facts = ctx.of(self)
        if facts is None:
            return []
        declared = ctx.of(surrogates.FEATURE)
        excused = set(decided.surrogate) | set(declared.declared if declared else ())
        departed = _departures(ctx)
        undone = {(p.names[0], p.index) for p in departed.projections} if departed else set()
        out = [_departed(_projection(p, p.names[0] in excused))
               if (p.names[0], p.index) in undone else _projection(p, p.names[0] in excused)
               for p in facts.projections]
        return out + _composition_checks(ctx)

    def reported(self, ctx: Context, inputs: Sequence[Any]) -> dict[str, Any]:
        """What a model checked at scale compared and how (empty where every element was)."""
        found = judged_by(ctx)
        if found is None:
            return {}
        total = sum(i.total for i in inputs)
        from gradscope.features import inplace  # (its pointed projections import this)

        in_place = ctx.of(inplace.FEATURE)
        said = coverage(found, total, sum(i.checked for i in inputs),
                        in_place.checks if in_place is not None else ())
        departed = _departures(ctx)
        return {"coverage": said + (
            "; the projections against autograd with torch's documented departures undone"
            if departed is not None and departed.composition is not None else "")}


FEATURE = Projections()


def _departures(ctx: Context) -> Any:
    """The departures feature's facts (it imports this module: imported here, when asked)."""
    from gradscope.features import departures  # (it imports this module)

    return ctx.of(departures.FEATURE)


def judged_by(ctx: Context) -> Composition | None:
    """The composition a model at scale is judged by: the one against autograd with torch's
    departures undone where only that one agrees, else autograd's own."""
    departed, facts = _departures(ctx), ctx.of(FEATURE)
    if departed is not None and departed.composition is not None:
        return departed.composition
    return facts.composition if facts is not None else None


def _composition_checks(ctx: Context) -> list[NamedCheck]:
    """A model at scale: each projection over every tensor at once, passing where it agrees
    within its slack; one whose stencil crossed a kink at every step tried is `not run`
    (nothing compared: never a pass for the tensors it alone covers); one that agrees only
    against autograd with torch's departures undone is that departure."""
    found = judged_by(ctx)
    if found is None:
        return []
    grads = ctx.evidence.backward.grads
    size = sum(grads[n].numel() for n in found.order) if grads is not None else 0
    out = []
    for p in found.projections:
        label = (f"projection #{p.index + 1} over every tensor at once ({len(p.names):,} "
                 f"tensors, {size:,} elements)")
        out.append(p.check(label, found.start or p.names[-1]))
    departed = _departures(ctx)
    return [_departed(c) for c in out] if departed is not None and \
        departed.composition is not None else out


def _departed(check: NamedCheck) -> NamedCheck:
    """A projection that agrees once torch's documented departures are undone (its error is
    the departure's): excused, and said so."""
    return replace(check, label=f"{check.label}: torch's documented departure (it agrees with "
                   "the departure undone)", mismatches=0,
                   statuses=dict.fromkeys(check.statuses, Status.SURROGATE),
                   result=Status.SURROGATE)


def _projection(p: Projection, surrogate: bool) -> NamedCheck:
    """A sampled input's projection: passing where it agrees within its slack, and where a
    kink or a surrogate explains the difference."""
    name = p.names[0]
    label = f"random projection #{p.index + 1} of {name} (all {p.elements:,} elements)"
    if p.rejected:  # nothing compared: the sampled elements still judge the input
        return NamedCheck(f"{label}: the target rejected its points ({p.rejected})",
                          Status.NOT_RUN, statuses={name: Status.NOT_RUN})
    finite = math.isfinite(p.difference)
    if not finite and not p.kinked:  # NaN or inf along t (values near overflow, outputs
        # undefined there): nothing compared; the sampled elements still judge the input
        return NamedCheck(f"{label}: undefined (NaN or infinite along it)",
                          Status.UNDEFINED, statuses={name: Status.UNDEFINED})
    ok = p.kinked or surrogate or p.difference <= p.slack
    word = Status.NONDIFFERENTIABLE if p.kinked else Status.SURROGATE if surrogate else (
        Status.OK if ok else Status.MISMATCH)
    return NamedCheck(label, word, p.difference if finite else float("nan"), 0 if ok else 1,
                      {name: word})


# ------------------------------------------------------------------ a sampled input's
def projected(prepared: Prepared, back: Backward, finite: Finite, tol: Tolerance
              ) -> tuple[Projection, ...]:
    """For each sampled input: vᵀJt from finite differences along random directions t over
    all its elements, against (Jᵀv)·t from autograd (`back.grads`)."""
    fd = finite.fd
    if fd is None or back.grads is None:
        return ()
    v = back.upstream.to(torch.float64)
    out = []
    for name in prepared.target.names:
        est = finite.estimates.get(name)
        if est is None or est.sampled is None:
            continue
        x = fd.values[name]
        g = back.grads[name].to(torch.float64)
        for k in range(PROJECTIONS):
            gen = generator(prepared.options.seed, f":proj:{name}:{k}")
            t = torch.randn(x.shape, generator=gen, dtype=torch.float64).to(x.device)
            try:
                d = fd.directional({name: t})
            except TargetError as exc:  # the target rejects points along t: not run
                out.append(Projection((name,), k, float("nan"), 0.0, rejected=rejection(exc),
                                 elements=t.numel()))
                continue
            gt = torch.mul(g, t)
            dot = float(gt.sum())
            norm = float(torch.linalg.vector_norm(g)) if statistical(fd) else None
            difference, slack = judged(d, v, dot, float(gt.abs_().sum()), norm, tol.atol,
                                       tol.rtol)
            out.append(Projection((name,), k, difference, slack, kinked=bool(d.kink.any()),
                             elements=t.numel()))
    return tuple(out)


def judged(d: Directional, v: torch.Tensor, dot: float, spread: float, norm: float | None,
           atol: float, rtol: float) -> tuple[float, float]:
    """A projection's difference |vᵀ(J·t) − (Jᵀv)·t| (`dot`: autograd's side) and the slack it
    is allowed: the tolerance of autograd's side plus three times the estimate's own error
    bound (≥ 0: one temporary, not three).

    Autograd's side may be off by an error e with |eᵢ| ≤ rtol·|gᵢ| at every element and still
    pass per element; along t its share is e·t. The worst case is rtol·Σ|gᵢtᵢ| (`spread`);
    but t is drawn independently of e, so e·t ~ N(0, |e|²) with |e| ≤ rtol·|g| (`norm`), and
    it exceeds Z_SIGMA·rtol·|g| with probability below 2·10⁻⁹. The smaller of the two is
    allowed: over n elements the first is about √n times the second, so a projection over a
    model of 10⁹ elements sees errors some 10⁴ times smaller than a worst-case bound lets it.
    `norm` None: the worst case alone (`statistical`)."""
    tolerated = rtol * (spread if norm is None else min(spread, Z_SIGMA * norm))
    slack = atol + tolerated + 3 * float(weighted(v, d.error).abs_().sum())
    return abs(float(weighted(v, d.value).sum()) - dot), slack


def statistical(fd: FiniteDifferences) -> bool:
    """Whether a projection may allow autograd its tolerance along the direction (`judged`):
    where the target computes in float64. Below it the differences' own error estimate is
    what falls short: the correct 10⁹-parameter Llama shape checked in float32 failed a
    projection at 6σ (benchmarks/models.py --scale --one-b). The worst case stays there, and
    hides much: on the 2-layer shape in float32 it allows twice the gradient's norm."""
    return fd.point.machine_eps <= torch.finfo(torch.float64).eps


# ------------------------------------------------------------------ a model at scale
def composed_over(prepared: Prepared, back: Backward, finite: Finite, tol: Tolerance
                  ) -> Composition:
    """Projections over every tensor at once, in forward order (for the bisection)."""
    assert finite.fd is not None and back.grads is not None
    entered = list(back.flow.entered) if back.flow is not None else []
    order = in_forward_order(list(prepared.target.names), entered)
    return composed(finite.fd, back.grads, back.upstream, order, tol.atol, tol.rtol,
                    prepared.options.seed)


@dataclass(frozen=True)
class _Side:
    """Autograd's side of every projection: the gradients, the upstream, each tensor's
    squared gradient norm (computed once, not per projection) and the tolerances."""

    grads: Mapping[str, torch.Tensor]
    v: torch.Tensor
    squares: Mapping[str, float]
    atol: float
    rtol: float
    statistical: bool  # (`statistical`: else the worst case alone)


def composed(fd: FiniteDifferences, grads: Mapping[str, torch.Tensor], upstream: torch.Tensor,
             order: Sequence[str], atol: float, rtol: float, seed: int, pointed: bool = False
             ) -> Composition:
    """DIRECTIONS projections over every tensor in `order` (forward order), the first that
    disagrees drilled down. `pointed`: `order` is the few tensors another analysis points at
    (as sensitive as their own gradient's norm allows, where a projection over every tensor
    is as sensitive as the model's): directions of their own, extrapolated from the start."""
    order = tuple(order)
    # (f's round-off, measured once on a moved copy of the inputs: before a direction is
    # held, so that the two are never in memory together)
    fd.point.noise()
    side = _Side(grads, upstream.to(torch.float64),
                 {n: _sums(grads[n], grads[n])[0] for n in order}, atol, rtol, statistical(fd))
    offset = DIRECTIONS if pointed else 0
    # (each direction drawn when used, never all at once: one is a float32 copy of the model;
    # the perturbed copies' buffers are one set for every projection)
    scratch: dict[str, torch.Tensor] = {}
    found = tuple(_along(fd, side, _direction(fd, order, seed, offset + k), order, k,
                         two_first=not pointed, scratch=scratch) for k in range(DIRECTIONS))
    wrong = next((p for p in found if p.compared and not p.agrees), None)
    if wrong is None:
        return Composition(found, order)
    start, agreed, steps = _drilled(fd, side, _direction(fd, order, seed, offset + wrong.index),
                                    order, wrong.index, scratch)
    return Composition(found, order, start, agreed, steps)


def _direction(fd: FiniteDifferences, names: Sequence[str], seed: int, k: int
               ) -> dict[str, torch.Tensor]:
    """A seeded Gaussian direction over every element of `names` (float32, each drawn from
    its own generator: the same tensor gets the same direction whatever else is checked;
    held in float16 past HALF_FROM elements: both sides of a projection read the very same
    direction, and a model's size of it is half the memory)."""
    held = torch.float16 if sum(fd.values[n].numel() for n in names) > HALF_FROM \
        else torch.float32
    out = {}
    for name in names:
        x = fd.values[name]
        gen = generator(seed, f":compose:{name}:{k}", x.device)
        # (float32 draws are four times faster than float64 ones and as Gaussian; drawn where
        # the tensor is: a GPU's own generator)
        out[name] = torch.randn(x.shape, generator=gen, dtype=torch.float32,
                                device=x.device).to(held)
    return out


def _along(fd: FiniteDifferences, side: _Side, t: Mapping[str, torch.Tensor],
           names: tuple[str, ...], index: int, two_first: bool = True,
           scratch: dict[str, torch.Tensor] | None = None) -> Projection:
    """One projection over `names`, its stencil shrunk while it crosses a kink. `two_first`:
    a two-point difference first (the projections over every tensor, which agree on a correct
    model); the drill-down, already on a failure's path, extrapolates from the start."""
    moved = {n: t[n] for n in names}
    dot = spread = 0.0
    for n in names:
        got = _sums(side.grads[n], moved[n])
        dot += got[0]
        spread += got[1]
    norm = math.sqrt(sum(side.squares[n] for n in names))
    along = norm if side.statistical else None  # (`judged`'s norm)
    shrink = 1.0
    for attempt in range(SHRINKS + 1):
        try:
            # two points first (two evaluations of the model, not four): a central difference
            # that agrees within a bound of round-off alone is accepted — its truncation error
            # would have to cancel a real error to hide it; one that does not is extrapolated
            d = fd.directional(moved, shrink=shrink, points=2 if two_first else 4,
                               scratch=scratch)
            difference, slack = judged(d, side.v, dot, spread, along, side.atol, side.rtol)
            if two_first and (difference > slack or bool(d.kink.any())):
                d = fd.directional(moved, shrink=shrink, scratch=scratch)
        except TargetError as exc:
            return Projection(names, index, float("nan"), 0.0, norm, rejected=str(exc)[:200])
        difference, slack = judged(d, side.v, dot, spread, along, side.atol, side.rtol)
        kinked = bool(d.kink.any())
        if not kinked or attempt == SHRINKS:
            return Projection(names, index, difference, slack, norm, kinked)
        shrink *= SHRINK
    raise AssertionError("unreachable")  # (the loop returns on its last attempt)


def _sums(g: torch.Tensor, t: torch.Tensor) -> tuple[float, float]:
    """Σ g·t and Σ|g·t| in float64, a block of elements at a time (a float64 temporary of a
    whole tensor — an embedding of 65M elements — is half a gigabyte; two of them, one)."""
    flat_g, flat_t = g.reshape(-1), t.reshape(-1)
    dot = spread = 0.0
    for start in range(0, flat_g.numel(), BLOCK):
        gt = torch.mul(flat_g[start:start + BLOCK].double(), flat_t[start:start + BLOCK])
        dot += float(gt.sum())
        spread += float(gt.abs_().sum())
    return dot, spread


def _drilled(fd: FiniteDifferences, side: _Side, t: Mapping[str, torch.Tensor],
             order: tuple[str, ...], index: int, scratch: dict[str, torch.Tensor]
             ) -> tuple[str | None, tuple[str, ...], tuple[Projection, ...]]:
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
            p = _along(fd, side, t, group, index, two_first=False, scratch=scratch)
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
