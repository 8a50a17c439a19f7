"""Evaluating many perturbed points of one input at once: a column of the Jacobian per
perturbed element, at the stencil's points. Columns are evaluated incrementally where the target
offers a column evaluator (no perturbed copies: `expr.incremental`), else as perturbed copies
in memory-bounded `torch.func.vmap` batches (a Python loop when the target cannot be vmapped),
halving a batch that runs out of memory.

A vmap batch is a shortcut: the target's code runs batched (a custom Function's own `vmap`
rule instead of its forward), and it decides nothing before it proved itself — the first batch
is compared, at its first point, with a plain call there; where they disagree, every later
evaluation is a plain call (a loop) and the disagreement is kept (`batched_apart`) for the
report to say what it is: the batched rule disagrees with plain calls, not a wrong backward."""

# Long: one class — a batch's chunks, its vmap call, its loop and the proof that ties the two
# share the batch's state (which columns fit, whether vmap holds); split, the proof and the
# calls it judges could drift apart.

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch

from gradscope.engines.fd.point import Point
from gradscope.engines.fd.stencil import (
    BATCH_ELEMENTS,
    REFINE_FACTOR,
    REFINE_ROUNDS,
    STENCIL,
    estimate,
    kinked,
    kinked_reusing,
    numel,
    richardson_reusing,
    second_difference,
)
from gradscope.errors import TargetError
from gradscope.tensors import branch_changed, gap, shares_storage

FOUND = -1  # the branch key of kinks the differences found themselves (no branch id had them)

MODEL_BATCH = 256  # columns per vmapped call of a whole model
MODEL_BATCH_ELEMENTS = 1 << 25  # activations one such call may hold (256 MB in float64)
# elements one vmapped chunk may hold per tensor on a GPU: its every batch is a launch of each
# kernel, whatever the batch's size, so the CPU's cache-sized chunks (BATCH_ELEMENTS) would
# make it launch-bound: 37 RMSNorm calls of 34,816 elements in a 10⁹ Llama, 3 columns a
# batch, took 78 s on an H200 (256 MB in float64, as MODEL_BATCH_ELEMENTS)
DEVICE_BATCH_ELEMENTS = MODEL_BATCH_ELEMENTS
# What torch says about its own vmap internals (a fallback, an out= resize): not the user's
# business, since the batching is gradscope's.
VMAP_NOTES = ("There is a performance drop because we have not yet implemented the batching",
              "An output with one or more elements was resized")


class Columns(NamedTuple):
    """k columns: estimate and error (n_out, k), {branch index: (k,) changed}, and for a
    two-point pass of perturbed copies the second differences a refinement reuses (`Halfway`;
    zeros where no kink is looked for, None where not kept)."""

    estimate: torch.Tensor
    error: torch.Tensor
    kinks: dict[int, torch.Tensor]
    second: torch.Tensor | None = None


@dataclass(frozen=True)
class Halfway:
    """k two-point columns at the step a refinement uses again, (n_out, k) each: their
    estimate, its bound and second difference. The refinement evaluates ±h/2 only."""

    d1: torch.Tensor
    error: torch.Tensor
    second: torch.Tensor

    def part(self, cols: Any) -> Halfway:
        return Halfway(self.d1[:, cols], self.error[:, cols], self.second[:, cols])


def _part(halfway: Halfway | None, cols: Any) -> Halfway | None:
    return None if halfway is None else halfway.part(cols)

# a vmap batch agrees with a plain call where they differ by no more than this many units of
# the output's dtype, times its largest magnitude (a batched reduction sums in another order)
AGREED_ULPS = 1000

# Failed evaluations one batch of columns may spend finding the columns the target rejects
# (halving the batch each time): past it the target rejects too much to be worth finding.
MAX_REJECTED = 64


@dataclass(frozen=True)
class Rejected:
    """Which columns of a batch the target rejected (raised at one of their points), as a
    (k,) mask, and the first error it raised (None: none was rejected)."""

    mask: torch.Tensor
    error: TargetError | None = None


class Batcher:
    """Columns of the Jacobian around `point`; `elementwise` (shared with the engine, which
    adds what probing finds) names the inputs perturbed all at once: the others are evaluated
    column by column, and a column evaluator none of them can use is dropped."""

    def __init__(self, point: Point, elementwise: set[str]) -> None:
        self.point = point
        self.elementwise = elementwise
        self.vmap_failed: str | None = None  # why vmap could not be used (a loop then)
        self.proven = False  # a vmap batch agreed with a plain call at the same point
        self.batched_apart: str | None = None  # how a vmap batch disagreed with plain calls
        self.memory_cap: dict[str, int] = {}  # input → columns per batch that fit in memory
        self.column_fn: dict[str, Any] = {}  # input → its column evaluator, once tried
        self._factory = point.column_factory
        self._bases: dict[tuple[str, int], torch.Tensor] = {}  # (input, k) → unperturbed batch

    def chunks(self, todo: torch.Tensor, n_in: int, n_out: int, name: str | None = None
               ) -> Iterator[torch.Tensor]:
        size = self.chunk_size(name, n_in, n_out)
        for start in range(0, todo.numel(), size):
            yield todo[start:start + size]

    def chunk_size(self, name: str | None, n_in: int, n_out: int) -> int:
        """Columns per batch, sized for the four-point stencil: a column costs its widest
        tensor, which for a whole evaluation is the largest of the input, the output and the
        activations one evaluation keeps (measured once); capped where memory ran out."""
        columns = self.columns(name) if name is not None else None
        model = False
        if columns is not None:  # no perturbed copies: a column costs its widest node
            widest = max(n_out, columns.width, 1)
        else:
            point = self.point
            tensors = max(n_in, n_out, max((b.numel() for b in point.branches), default=1))
            widest = max(tensors, point.activations(), 1)
            model = widest > tensors
        if model:  # many small ops per evaluation, whose per-call overhead only large batches
            # amortise (measured on a 34k-parameter stack: 0.37 ms per evaluation at 16
            # columns, 0.08 ms at 256)
            size = max(1, min(MODEL_BATCH, MODEL_BATCH_ELEMENTS // widest))
        else:
            held = BATCH_ELEMENTS if self.point.out.device.type == "cpu" \
                else DEVICE_BATCH_ELEMENTS
            size = max(1, held // (4 * widest))  # (4: the column evaluator's points)
        return min(size, self.memory_cap.get(name, size)) if name is not None else size

    def column_width(self, name: str) -> int | None:
        """Per-column storage of the target's column evaluator for `name` (elements), or None
        when columns need a whole evaluation each."""
        columns = self.columns(name)
        return None if columns is None else max(1, columns.width)

    def columns(self, name: str) -> Any:
        """The target's column evaluator for `name` when it supports this expression (tried
        once on one column; any exception means vmap batches instead), else None."""
        if name not in self.column_fn:
            fn = self._factory(name) if self._factory is not None else None
            if fn is not None:
                try:
                    one = torch.zeros(1, dtype=torch.long, device=self.point.out.device)
                    fn(one, self.point.step_at(name, one))
                except Exception:  # the evaluator cannot take this expression (or a case it
                    fn = None  # does not foresee): the general batches instead
            self.column_fn[name] = fn
            dense = [n for n in self.point.values if n not in self.elementwise]
            if all(self.column_fn.get(n, 0) is None for n in dense):
                # no input can use it: drop the factory and the base node values it keeps
                self._factory = None
        return self.column_fn[name]

    def perturb(self, name: str, x: torch.Tensor, idx: torch.Tensor, h: torch.Tensor,
                points: int = 4, halfway: Halfway | None = None) -> Columns:
        """The columns of the elements `idx` of `name` (steps `h`) at `points` stencil points
        (four from `halfway` and the points at ±h/2, where the columns are copies)."""
        k = len(idx)
        columns = self.columns(name)
        if columns is not None:
            scales = torch.tensor(STENCIL[:points], dtype=self.point.dtype,
                                  device=x.device).repeat_interleave(k)
            try:
                outs, flags = columns(idx.repeat(points), scales * h.repeat(points))
            except Exception:  # never seen; the general batches are the reference anyway
                self.column_fn[name] = None
                return self._in_chunks(name, x, idx, h, points)
            outs = outs.reshape(points, k, -1).transpose(1, 2)  # (points, n_out, k)
            est, err = estimate(outs, h.unsqueeze(0), self.point.machine_eps, self._noise())
            kinks = {j: f.reshape(points, k).any(0) for j, f in flags.items() if bool(f.any())}
            return Columns(est, err, kinks)
        if k > self.chunk_size(name, x.numel(), numel(self.point.out_shape)):
            return self._in_chunks(name, x, idx, h, points, halfway)  # sized for copies
        try:
            return self._copies(name, x, idx, h, points, halfway)
        except (RuntimeError, MemoryError) as exc:
            # An estimate of activations can be wrong: on an allocation failure halve the
            # batch (and remember the size for the next ones), down to a single column.
            if k == 1 or not out_of_memory(exc):
                raise
            self.memory_cap[name] = max(1, k // 2)
            half = k // 2
            low, high = slice(None, half), slice(half, None)
            return joined([self.perturb(name, x, idx[low], h[low], points, _part(halfway, low)),
                           self.perturb(name, x, idx[high], h[high], points,
                                        _part(halfway, high))], x.device)

    def tolerant(self, name: str, x: torch.Tensor, idx: torch.Tensor, h: torch.Tensor,
                 points: int = 4, halfway: Halfway | None = None
                 ) -> tuple[Columns, Rejected]:
        """`perturb`, where the target may reject some perturbed points (an ODE solver's
        "underflow in dt", a probability pushed past 1): the batch is halved down to the
        columns it rejects, which come back NaN and marked. The target's rejection is never
        the check's failure; only past MAX_REJECTED failed calls is it raised."""
        failures = [0]
        first: list[TargetError] = []

        def attempt(part: torch.Tensor, hp: torch.Tensor, hw: Halfway | None
                    ) -> tuple[Columns, torch.Tensor]:
            try:
                return self.perturb(name, x, part, hp, points, hw), \
                    torch.zeros(len(part), dtype=torch.bool, device=x.device)
            except TargetError as exc:
                first.append(exc)
                failures[0] += 1
                if failures[0] > MAX_REJECTED:
                    raise first[0] from None
            if len(part) == 1:
                return smaller(part, hp)
            a, b = slice(None, len(part) // 2), slice(len(part) // 2, None)
            low, high = attempt(part[a], hp[a], _part(hw, a)), attempt(part[b], hp[b], _part(hw, b))
            return joined([low[0], high[0]], x.device), torch.cat([low[1], high[1]])

        def smaller(part: torch.Tensor, hp: torch.Tensor) -> tuple[Columns, torch.Tensor]:
            # one rejected column: smaller steps may stay inside the target's domain
            for _ in range(REFINE_ROUNDS):
                hp = hp / REFINE_FACTOR
                try:
                    return self.perturb(name, x, part, hp, points), \
                        torch.zeros(1, dtype=torch.bool, device=x.device)
                except TargetError:
                    failures[0] += 1
                    if failures[0] > MAX_REJECTED:
                        raise first[0] from None
            nan = torch.full((numel(self.point.out_shape), 1), float("nan"),
                             dtype=self.point.dtype, device=x.device)
            return Columns(nan, nan.clone(), {}), torch.ones(1, dtype=torch.bool, device=x.device)

        columns, mask = attempt(idx, h, halfway)
        return columns, Rejected(mask, first[0] if first else None)

    def _copies(self, name: str, x: torch.Tensor, idx: torch.Tensor, h: torch.Tensor,
                points: int, halfway: Halfway | None = None) -> Columns:
        k = len(idx)
        flat = x.reshape(-1)
        rows = torch.arange(k, device=x.device)
        batch = torch.empty((k, flat.numel()), dtype=flat.dtype, device=flat.device)

        def at(scale: float) -> torch.Tensor:
            # (the batch rewritten whole for each point: a target that writes into its input
            # changes nothing the next point sees, and no new copy is faulted in per point)
            batch.copy_(flat.expand(k, flat.numel()))
            batch[rows, idx] += scale * h
            return batch.view_as(batch)

        return self._stencil(name, x, k, at, h.unsqueeze(0), points, halfway, keep=True)

    def along(self, name: str, x: torch.Tensor, dirs: torch.Tensor, points: int = 2
              ) -> Columns:
        """Differences along k whole directions of `name` at once ((k, numel) steps, already
        scaled), at `points` stencil points: column i is the derivative along dᵢ."""
        flat = x.reshape(-1)
        ones = torch.ones(1, dirs.shape[0], dtype=self.point.dtype, device=x.device)
        batch = torch.empty(dirs.shape, dtype=torch.promote_types(flat.dtype, dirs.dtype),
                            device=x.device)
        return self._stencil(name, x, dirs.shape[0], lambda scale: torch.add(
            flat, dirs, alpha=scale, out=batch).view_as(batch), ones, points)

    def _stencil(self, name: str, x: torch.Tensor, k: int, at: Any, h: torch.Tensor,
                 points: int, halfway: Halfway | None = None, keep: bool = False) -> Columns:
        """The stencil's points for k perturbed copies (`at(scale)`: the (k, numel) batch);
        with `halfway`, the points at ±h/2 only. `keep`: a two-point pass keeps its second
        differences for a refinement to reuse."""
        # One stencil point at a time: a batch holds k perturbed copies, not 4k (a single
        # column of a 20M-element input is 160 MB per copy).
        per_point, kinks = [], {}
        for scale in (STENCIL[2:] if halfway is not None else STENCIL[:points]):
            batch = at(scale)
            out, branches = self.batched(name, batch.reshape(k, *x.shape))
            if shares_storage(out, batch):  # (f returned its input: `at` rewrites that)
                out = out.clone()
            per_point.append(out.reshape(k, -1).transpose(0, 1))  # (n_out, k)
            del batch
            for j, (b, b0) in enumerate(zip(branches, self.point.branches, strict=True)):
                changed = branch_changed(b, b0.unsqueeze(0)).reshape(k, -1).any(-1)
                kinks[j] = kinks[j] | changed if j in kinks else changed
        kinks = {j: m for j, m in kinks.items() if bool(m.any())}
        eps, find = self.point.machine_eps, self.point.find_kinks
        if halfway is not None:
            est, err = richardson_reusing(halfway.d1, halfway.error, *per_point, h)
            found = kinked_reusing(halfway.second, halfway.error, halfway.d1,
                                   self._base(name, x, k), *per_point, h, eps) if find else None
            return Columns(est, err, _with_found(kinks, found))
        est, err = estimate(per_point, h, eps, self._noise())
        if points == 2:
            second = None if not keep else torch.zeros_like(est) if not find else \
                second_difference(*per_point, self._base(name, x, k))
            return Columns(est, err, kinks, second)
        found = kinked(self._base(name, x, k), per_point, h, eps) if find else None
        return Columns(est, err, _with_found(kinks, found))

    def _noise(self) -> torch.Tensor:
        """f's round-off per output element, as a column (n_out, 1)."""
        return self.point.noise().reshape(-1, 1)

    def _base(self, name: str, x: torch.Tensor, k: int) -> torch.Tensor:
        """f at k unperturbed copies, batched the way the perturbed ones are, (n_out, k): a
        batched op may sum in another order than the one evaluation at the base point, and a
        long reduction's round-off (a cumsum of thousands) would read as a kink. Once per batch
        size."""
        key = (name, k)
        if key not in self._bases:
            # evaluated one at a time (vmap fell back to a loop), every copy is the one
            # evaluation at the base point: it is made once, not k times
            copies = 1 if self.vmap_failed is not None else k
            batch = x.reshape(1, *x.shape).expand(copies, *x.shape).clone()
            out, _ = self.batched(name, batch)
            self._bases[key] = out.reshape(copies, -1).transpose(0, 1).expand(-1, k)
        return self._bases[key]

    def _in_chunks(self, name: str, x: torch.Tensor, idx: torch.Tensor, h: torch.Tensor,
                   points: int, halfway: Halfway | None = None) -> Columns:
        """`perturb` over vmap-sized pieces of `idx` (a chunk sized for the column evaluator
        can be far too large for perturbed copies)."""
        pieces = [self.perturb(name, x, idx[part], h[part], points, _part(halfway, part))
                  for part in self.chunks(torch.arange(len(idx), device=idx.device),
                                          x.numel(), numel(self.point.out_shape), name)]
        return joined(pieces, x.device)

    def batched(self, name: str, batch: torch.Tensor) -> tuple[torch.Tensor, list]:
        """The target at each of the stacked values of `name` in `batch` (the others fixed)."""
        point = self.point
        fn = point.moving(name)

        def one(xi: torch.Tensor):
            vals = dict(point.values)
            vals[name] = xi
            out, branches = fn(vals)
            return out, tuple(branches)

        if self.vmap_failed is None:
            try:
                with warnings.catch_warnings():  # torch's notes about its own vmap fallbacks
                    for note in VMAP_NOTES:
                        warnings.filterwarnings("ignore", message=note, category=UserWarning)
                    out, branches = torch.func.vmap(one)(batch)
            except Exception as exc:  # ops without a batching rule: fall back to a loop
                self.vmap_failed = f"vmap unavailable: {str(exc).splitlines()[0][:80]}"
                return self._looped(one, batch, reset=True)
            if self.proven or self._agrees(one, batch, out):
                return out, list(branches)
            return self._looped(one, batch)
        return self._looped(one, batch)

    def _agrees(self, one: Any, batch: torch.Tensor, out: torch.Tensor) -> bool:
        """Whether the batch's first point, evaluated batched, is what a plain call there
        gives (within round-off: a batched op may sum in another order). Where it is not,
        vmap is given up for this check and the disagreement kept."""
        alone = one(batch[0])[0].expand(self.point.out_shape)
        top, scale = gap(out[0].reshape(alone.shape), alone)
        if top <= AGREED_ULPS * torch.finfo(alone.dtype).eps * scale:
            self.proven = True
            return True
        self.batched_apart = (f"the batched (vmap) evaluation of the target disagreed with a "
                              f"plain call at the same point (by up to {top:.3g}, of values up "
                              f"to {scale:.3g})")
        self.vmap_failed = "a vmap batch disagreed with a plain call: plain calls decided"
        return False

    def _looped(self, one: Any, batch: torch.Tensor, reset: bool = False
                ) -> tuple[torch.Tensor, list]:
        """The batch one value at a time. `reset`: vmap just failed on it; if the loop fails
        too, the target rejected these points (not vmap), and vmap stays in use."""
        point = self.point
        try:
            results = [one(xi) for xi in batch]
        except TargetError:
            if reset:
                self.vmap_failed = None
            raise
        out = torch.stack([r[0].expand(point.out_shape) for r in results])
        branches = [torch.stack([r[1][j] for r in results]) for j in range(len(point.branches))]
        return out, branches


def _with_found(kinks: dict[int, torch.Tensor], found: torch.Tensor | None
                ) -> dict[int, torch.Tensor]:
    """The branch kinks and, under FOUND, the columns `kinked` found ((n_out, k) → any)."""
    if found is not None and bool((found := found.any(0)).any()):
        kinks[FOUND] = found
    return kinks


def joined(pieces: list[Columns], device: torch.device) -> Columns:
    """Column pieces side by side (second differences where every piece kept them)."""
    est = torch.cat([p.estimate for p in pieces], dim=1)
    err = torch.cat([p.error for p in pieces], dim=1)
    kinks: dict[int, torch.Tensor] = {}
    for j in {j for p in pieces for j in p.kinks}:
        kinks[j] = torch.cat([p.kinks.get(j, torch.zeros(p.estimate.shape[1], dtype=torch.bool,
                                                         device=device)) for p in pieces])
    kept = [p.second for p in pieces]
    second = torch.cat(kept, dim=1) if all(s is not None for s in kept) else None
    return Columns(est, err, kinks, second)


def out_of_memory(exc: BaseException) -> bool:
    """An allocation failure (CPU or CUDA), as opposed to any other error of the target."""
    if isinstance(exc, MemoryError):
        return True
    text = str(exc).lower()
    return any(s in text for s in ("out of memory", "can't allocate memory",
                                   "cannot allocate memory", "not enough memory"))


def rejection(exc: TargetError) -> str:
    """What the target raised at a perturbed point, in one line."""
    if not exc.error:
        return str(exc).strip().splitlines()[-1]
    lines = exc.detail.strip().splitlines()
    return f"{exc.error}: {lines[0]}"[:200] if lines else exc.error
