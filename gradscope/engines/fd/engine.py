"""The finite-difference engine: central differences with Richardson extrapolation, in float64.

For each input it estimates the Jacobian columns J·e_i with steps h_i = eps·max(1, |x_i|).
An estimate starts as a two-point central difference (f(x+h) − f(x−h))/2h, which carries a
round-off bound only; a comparison that doubts an estimate has it *refined*: the h/2 points are
added, (4·D(h/2) − D(h))/3 extrapolated, and an error estimate kept (extrapolation difference
plus round-off). A two-point estimate that agrees with autograd within the tolerance is
accepted: its truncation error would have to cancel a real bug to hide it. Perturbations are
batched:

* *elementwise* inputs (each output element depends on at most one element of the input, which
  the IR tells) are perturbed all at once: two forward calls for the whole tensor (four, i.e.
  extrapolated from the start, below TWO_POINT_FROM elements, where the cost is negligible);
* otherwise each element is its own perturbation (a column). An expression whose perturbation
  stays one element until a sum/mean folds it in is evaluated column by column without copies
  (`expr.columns`, O(1) per column); anything else in memory-bounded chunks through
  `torch.func.vmap` (a Python loop only when the target cannot be vmapped).

A target may also report *branch ids* (which piece of each kinky op every element is on). An
element whose stencil changes a branch id straddles a kink, jump or pole: it is retried with
smaller steps and, if it still straddles, marked as such and never compared as a mismatch.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from gradscope.expr.incremental import Unsupported
from gradscope.tensors import any_to_shape, branch_changed, sum_to_shape

# f(values) -> (output, branch ids in a fixed order)
Traced = Callable[[Mapping[str, torch.Tensor]], tuple[torch.Tensor, list[torch.Tensor]]]
# columns(positions, deltas) -> (outputs (B, *out_shape), {branch index: (B,) changed}): the
# target moved by deltas[b] at flat position positions[b], for every b (see expr.columns)
ColumnFn = Callable[[torch.Tensor, torch.Tensor],
                    tuple[torch.Tensor, dict[int, torch.Tensor]]]
# around(base) -> (f(base), its branch ids, a factory: input name -> Traced for points that
# move that input only, a factory: input name -> ColumnFn or None)
Around = Callable[[Mapping[str, torch.Tensor]],
                  tuple[torch.Tensor, list[torch.Tensor], Callable[[str], Traced],
                        Callable[[str], Any]]]

EPS64 = float(torch.finfo(torch.float64).eps)
REFINE_FACTOR = 100.0
REFINE_ROUNDS = 2
# A column whose extrapolation error stays above this fraction of its size has not converged.
UNCONVERGED = 1e-2
# Refine a converged-looking element too when its error estimate is above this (relative).
REFINE_ERROR = 1e-7
# Elementwise inputs this large start with two points (two forward calls, not four); smaller
# ones are cheap enough to show the extrapolated estimate for every element from the start.
TWO_POINT_FROM = 1 << 16
# Code gradscope cannot read (Python targets) is probed for elementwise structure once its dense
# Jacobian would hold more entries than this; smaller ones are differenced column by column.
PROBE_FROM = 1 << 20
BATCH_ELEMENTS = 1 << 19  # elements held by one vmapped chunk (per tensor): 4 MB in float64,
# small enough to stay in cache (measured: 2^19 beats 2^16 and 2^23 at 1e4 dense elements)


@dataclass
class Columns:
    """Finite-difference Jacobian information for one input."""

    name: str
    mode: str  # "elementwise" (all elements perturbed at once) or "dense" (one per element)
    in_shape: tuple[int, ...]
    out_shape: tuple[int, ...]
    partial: torch.Tensor  # elementwise: out-shaped ∂f_j/∂x_i(j); dense: (out_numel, in_numel)
    error: torch.Tensor  # same shape as partial
    kink: torch.Tensor  # bool, input-shaped: stencil straddles a kink/jump/pole
    kink_by_branch: dict[int, torch.Tensor] = field(default_factory=dict)  # branch → mask
    forward_calls: int = 0
    note: str = ""
    points: torch.Tensor | None = None  # stencil points per column/element (2, or 4 = refined)
    sampled: torch.Tensor | None = None  # sampled: flat indices of the columns estimated

    @property
    def checked(self) -> torch.Tensor | None:
        """Input-shaped mask of the elements that have an estimate (None: all of them)."""
        if self.sampled is None:
            return None
        mask = torch.zeros(_numel(self.in_shape), dtype=torch.bool, device=self.partial.device)
        mask[self.sampled] = True
        return mask.reshape(self.in_shape)

    def vjp(self, v: torch.Tensor, ones: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """(Jᵀv, its error estimate), shaped like the input (NaN where not sampled). `ones`:
        v is all ones (the default upstream), so an elementwise input needs no products."""
        if ones and self.mode == "elementwise" and self.sampled is None:
            return (sum_to_shape(self.partial, self.in_shape),
                    sum_to_shape(self.error, self.in_shape))
        v = v.to(self.partial.dtype)
        if self.sampled is not None:
            flat = v.reshape(-1)
            n_in = _numel(self.in_shape)
            grad = torch.full((n_in,), float("nan"), dtype=self.partial.dtype,
                              device=self.partial.device)
            err = torch.zeros_like(grad)
            grad[self.sampled] = flat @ self.partial
            err[self.sampled] = flat.abs() @ self.error
            return grad.reshape(self.in_shape), err.reshape(self.in_shape)
        if self.mode == "elementwise":
            grad = sum_to_shape(v * self.partial, self.in_shape)
            err = sum_to_shape(v.abs() * self.error, self.in_shape)
        else:
            flat = v.reshape(-1)
            grad = (flat @ self.partial).reshape(self.in_shape)
            err = (flat.abs() @ self.error).reshape(self.in_shape)
        return grad, err

    def locally_constant(self, atol: float) -> bool:
        """True when every column away from a kink is zero within its error: the function does
        not change with this input at any point checked (piecewise constant)."""
        smooth = ~self.kink.reshape(-1)
        if self.sampled is not None:
            smooth = smooth[self.sampled]
        return bool(smooth.any()) and not bool(self.nonconstant(atol, first=True).any())

    def nonconstant(self, atol: float, first: bool = False) -> torch.Tensor:
        """Input-shaped mask of the columns away from a kink with an entry beyond
        atol + 3·error: the elements the function changes with (`first`: stop at the first
        block of columns that has one; a dense Jacobian can hold 1e8 entries)."""
        if self.mode == "elementwise":  # one entry per output element: no matrix needed
            beyond = self.partial.abs() > atol + 3 * self.error
            return any_to_shape(beyond, self.in_shape) & ~self.kink
        if self.sampled is not None:
            jac, err = self.partial, self.error
            smooth = ~self.kink.reshape(-1)[self.sampled]
        else:
            jac, err = self.jacobian()
            smooth = ~self.kink.reshape(-1)
        moving = torch.zeros(jac.shape[1], dtype=torch.bool, device=jac.device)
        step = max(1, BATCH_ELEMENTS // max(1, jac.shape[0]))
        for start in range(0, jac.shape[1], step):
            block = slice(start, start + step)
            moving[block] = (jac[:, block].abs() > atol + 3 * err[:, block]).any(0)
            if first and bool((moving[block] & smooth[block]).any()):
                break
        moving &= smooth
        if self.sampled is None:
            return moving.reshape(self.in_shape)
        mask = torch.zeros(_numel(self.in_shape), dtype=torch.bool, device=moving.device)
        mask[self.sampled] = moving
        return mask.reshape(self.in_shape)

    def jacobian(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(J, error) as (out_numel, in_numel) matrices (NaN columns where not sampled)."""
        if self.mode == "dense":
            return self.partial, self.error
        if self.sampled is not None:
            n_out, n_in = self.partial.shape[0], _numel(self.in_shape)
            jac = torch.full((n_out, n_in), float("nan"), dtype=self.partial.dtype,
                             device=self.partial.device)
            err = torch.zeros_like(jac)
            jac[:, self.sampled], err[:, self.sampled] = self.partial, self.error
            return jac, err
        n_out, n_in = _numel(self.out_shape), _numel(self.in_shape)
        index = torch.arange(n_in, device=self.partial.device).reshape(self.in_shape)
        cols = index.expand(self.out_shape).reshape(-1)
        rows = torch.arange(n_out, device=self.partial.device)
        jac = torch.zeros(n_out, n_in, dtype=self.partial.dtype, device=self.partial.device)
        err = torch.zeros_like(jac)
        jac[rows, cols] = self.partial.reshape(-1)
        err[rows, cols] = self.error.reshape(-1)
        return jac, err


@dataclass
class Directional:
    """J·t for a forward-mode check: value, error and output elements near a kink."""

    value: torch.Tensor
    error: torch.Tensor
    kink: torch.Tensor


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _col_max(m: torch.Tensor) -> torch.Tensor:
    """Largest entry of each column of an (n_out, k) matrix (NaN-aware, 0 for no rows)."""
    if m.shape[0] == 0:
        return torch.zeros(m.shape[1], dtype=m.dtype, device=m.device)
    return torch.nan_to_num(m, nan=float("inf"), posinf=float("inf")).amax(0)


def _elapsed(tic: float, out: torch.Tensor) -> float:
    """Seconds since `tic` once `out` is computed (CUDA kernels run asynchronously)."""
    if out.is_cuda:
        torch.cuda.synchronize(out.device)
    return time.perf_counter() - tic


STENCIL = (1.0, -1.0, 0.5, -0.5)  # steps in units of h: two-point uses the first two


def _estimate(outs: list[torch.Tensor] | torch.Tensor, h: torch.Tensor,
              eps: float = EPS64) -> tuple[torch.Tensor, torch.Tensor]:
    """(derivative, error bound) from f at the STENCIL points: Richardson-extrapolated with
    four points; a central difference with two, whose bound is round-off only (its truncation
    error is unknown until a comparison doubts it and `refine` extrapolates)."""
    if len(outs) == 4:
        return _richardson(outs[0], outs[1], outs[2], outs[3], h, eps)
    fp, fm = outs[0], outs[1]
    # in place where possible: at a million elements each pass costs about a millisecond
    est = torch.sub(fp, fm).div_(h).mul_(0.5)
    err = fp.abs().add_(fm.abs()).div_(h).mul_(3 * eps)
    return est, err


def _richardson(fp: torch.Tensor, fm: torch.Tensor, fp2: torch.Tensor, fm2: torch.Tensor,
                h: torch.Tensor, eps: float = EPS64) -> tuple[torch.Tensor, torch.Tensor]:
    d1 = (fp - fm) / (2 * h)
    d2 = (fp2 - fm2) / h
    est = (4 * d2 - d1) / 3
    # round-off: each of the four values carries ~eps·|f|; |fp| + |fm| bounds |f| nearby
    err = (est - d2).abs() + 3 * eps * (fp.abs() + fm.abs()) / h
    return est, err


class FiniteDifferences:
    """Finite differences of a traced target around fixed float64 values."""

    def __init__(self, fn: Traced, values: Mapping[str, torch.Tensor], *,
                 elementwise: set[str], eps: float = 1e-4,
                 progress: Callable[[int], None] | None = None,
                 dtype: torch.dtype = torch.float64,
                 two_point_from: int = TWO_POINT_FROM, around: Around | None = None,
                 probe: bool = False) -> None:
        self.fn = fn
        self.dtype = dtype
        self.machine_eps = float(torch.finfo(dtype).eps)
        self.values = {k: v.detach().to(dtype) for k, v in values.items()}
        self.elementwise = set(elementwise)
        self.probe = probe  # look for elementwise structure the target cannot declare
        self.probed: dict[str, int] = {}  # input → forward calls its probe took (if it ran)
        self.eps = eps
        self.progress = progress
        self.two_point_from = two_point_from
        self._moving: Callable[[str], Traced] | None = None
        self._column_fns: Callable[[str], Any] | None = None
        self.column_fn: dict[str, Any] = {}  # input → its column evaluator, once tried
        tic = time.perf_counter()
        if around is not None:  # the target can reuse work for points that move one input
            self.out, self.branches, self._moving, self._column_fns = around(self.values)
        else:
            self.out, self.branches = fn(self.values)
        # what one whole evaluation costs here; a slow first call is timed again, since it may
        # have paid one-off warm-up (lazy imports, allocator growth)
        self.eval_seconds = _elapsed(tic, self.out)
        if self.eval_seconds > 0.01:
            tic = time.perf_counter()
            out, _ = fn(self.values)
            self.eval_seconds = min(self.eval_seconds, _elapsed(tic, out))
        self.out_shape = tuple(self.out.shape)
        self.vmap_failed: str | None = None
        self._cache: dict[str, Columns] = {}

    def _fn(self, name: str) -> Traced:
        """The target, for points that differ from the base values in `name` only."""
        return self._moving(name) if self._moving is not None else self.fn

    def step(self, name: str) -> torch.Tensor:
        return self.eps * self.values[name].abs().clamp(min=1.0)

    def is_elementwise(self, name: str) -> bool:
        """Whether every element of `name` can be perturbed at once: declared by the target,
        or (with `probe`, for large inputs) found by `_probe_elementwise`."""
        if name in self.elementwise:
            return True
        if not self.probe or name in self.probed:
            return False
        if self.values[name].numel() * max(1, self.out.numel()) <= PROBE_FROM:
            return False
        if self._probe_elementwise(name):
            self.elementwise.add(name)
            return True
        return False

    def _probe_elementwise(self, name: str) -> bool:
        """True when each output element moves with at most one element of `name`, the one
        broadcast to it, at this point and step. For every bit b of the element index, the
        elements whose bit is 1 (then 0) move by their step at once; an output element that
        changes although its own input element stayed depends on another one. Two indices
        differ in some bit, so every pair is tried in 2·log2(n) forward calls. A dependence too
        weak to change the output at this step is invisible to the comparison as well."""
        x = self.values[name]
        n = x.numel()
        self.probed[name] = 0
        try:
            if torch.broadcast_shapes(tuple(x.shape), self.out_shape) != self.out_shape:
                return False
        except RuntimeError:
            return False
        fn = self._fn(name)
        index = torch.arange(n, device=x.device).reshape(x.shape)
        moved = torch.add(x, self.step(name))
        for bit in range(max(1, (n - 1).bit_length())):
            ones = ((index >> bit) & 1).bool()
            for chosen in (ones, ~ones):
                vals = dict(self.values)
                vals[name] = torch.where(chosen, moved, x)
                out, _ = fn(vals)
                self.probed[name] += 1
                changed = branch_changed(out.expand(self.out_shape),
                                         self.out.expand(self.out_shape))
                if bool((changed & ~chosen.expand(self.out_shape)).any()):
                    return False
        return True

    def columns(self, name: str) -> Columns:
        if name not in self._cache:
            if name in self.elementwise:
                big = self.values[name].numel() >= self.two_point_from
                self._cache[name] = self._elementwise(name, 2 if big else 4)
            else:
                self._cache[name] = self._dense(name)
        return self._cache[name]

    # ------------------------------------------------------------ elementwise: 2 calls a round
    def _elementwise(self, name: str, points: int, mask: torch.Tensor | None = None
                     ) -> Columns:
        """Every element perturbed at once: `points` forward calls a round (with `mask`, only
        the elements `refine` asked for)."""
        x = self.values[name]
        h = self.step(name)
        if mask is not None:
            h = torch.where(mask, h, 0.0)  # only the masked elements move (others come out NaN)
        calls = 0
        best = None
        for round_ in range(REFINE_ROUNDS + 1):
            est, err, kink, by_branch = self._perturb_all(name, x, h, points)
            calls += points
            if best is None:
                best = [est, err, kink, by_branch]
            else:
                # Per input element keep the trustworthy estimate: off-kink first, then the one
                # with the smaller error.
                old_err = sum_to_shape(best[1], x.shape)
                new_err = sum_to_shape(err, x.shape)
                better = ~kink & (best[2] | (new_err < old_err))
                wide = better.expand(self.out_shape)
                best[0] = torch.where(wide, est, best[0])
                best[1] = torch.where(wide, err, best[1])
                best[2] = torch.where(better, kink, best[2])
                best[3] = {k: torch.where(better, by_branch.get(k, torch.zeros_like(better)),
                                          best[3].get(k, torch.zeros_like(better)))
                           for k in set(best[3]) | set(by_branch)}
            retry = best[2]
            if points == 4:  # only an extrapolated estimate knows its truncation error
                retry = retry | self._needs_refinement(best[0], best[1], x)
            if mask is not None:
                retry = retry & mask
            if round_ == REFINE_ROUNDS or not bool(retry.any()):
                break
            h = torch.where(retry, h / REFINE_FACTOR, h)
        est, err, kink, by_branch = best  # type: ignore[misc]
        if points == 4:
            kink = kink | self._unconverged(est, err, x)
        col = Columns(name, "elementwise", tuple(x.shape), self.out_shape, est, err, kink,
                      {k: m for k, m in by_branch.items() if bool(m.any())}, calls)
        col.points = torch.full(x.shape, points, dtype=torch.int8, device=x.device)
        return col

    def _refine_elementwise(self, col: Columns, todo: torch.Tensor) -> None:
        new = self._elementwise(col.name, 4, todo)
        wide = todo.expand(self.out_shape)
        col.partial = torch.where(wide, new.partial, col.partial)
        col.error = torch.where(wide, new.error, col.error)
        col.kink = torch.where(todo, new.kink, col.kink)
        none = torch.zeros_like(todo)
        by_branch = {k: torch.where(todo, new.kink_by_branch.get(k, none),
                                    col.kink_by_branch.get(k, none))
                     for k in set(col.kink_by_branch) | set(new.kink_by_branch)}
        col.kink_by_branch = {k: m for k, m in by_branch.items() if bool(m.any())}
        col.points = torch.where(todo, 4, col.points).to(torch.int8)
        col.forward_calls += new.forward_calls

    def _needs_refinement(self, est: torch.Tensor, err: torch.Tensor,
                          x: torch.Tensor) -> torch.Tensor:
        bad = (err > REFINE_ERROR * (est.abs() + 1)) & torch.isfinite(est)
        return any_to_shape(bad, x.shape)

    def _unconverged(self, est: torch.Tensor, err: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        bad = (err > UNCONVERGED * (est.abs() + 1)) & torch.isfinite(est)
        return any_to_shape(bad, x.shape)

    def _perturb_all(self, name: str, x: torch.Tensor, h: torch.Tensor, points: int):
        outs, kinks = [], []
        fn = self._fn(name)
        for scale in STENCIL[:points]:
            vals = dict(self.values)
            vals[name] = torch.add(x, h, alpha=scale)
            out, branches = fn(vals)
            outs.append(out.expand(self.out_shape))
            kinks.append([branch_changed(b, b0)
                          for b, b0 in zip(branches, self.branches, strict=True)])
        est, err = _estimate(outs, h.expand(self.out_shape), self.machine_eps)
        by_branch: dict[int, torch.Tensor] = {}
        for k in range(len(self.branches)):
            changed = kinks[0][k]
            for more in kinks[1:]:
                changed = changed | more[k]
            if bool(changed.any()):
                by_branch[k] = any_to_shape(changed, x.shape)
        kink = torch.zeros(x.shape, dtype=torch.bool, device=x.device)
        for mask in by_branch.values():
            kink |= mask
        return est, err, kink, by_branch

    # ------------------------------------------------------------ dense: one column per element
    def _dense(self, name: str) -> Columns:
        """Two-point differences for every column first (half of gradcheck's cost per column
        is what makes dense inputs affordable); `refine` upgrades the columns a comparison
        doubts to the extrapolated four-point estimate with its error bound."""
        x = self.values[name]
        n_in, n_out = x.numel(), _numel(self.out_shape)
        col = Columns(name, "dense", tuple(x.shape), self.out_shape,
                      torch.zeros(n_out, n_in, dtype=self.dtype, device=x.device),
                      torch.zeros(n_out, n_in, dtype=self.dtype, device=x.device),
                      torch.zeros(x.shape, dtype=torch.bool, device=x.device))
        col.points = torch.zeros(n_in, dtype=torch.int8, device=x.device)
        self._rounds(col, x, torch.arange(n_in, device=x.device), self.step(name).reshape(-1),
                     points=2)
        col.note = (f"per-element loop ({self.vmap_failed})" if self.vmap_failed
                    else "vmap batches")
        return col

    def sampled(self, name: str, count: int, seed: int) -> Columns:
        """Four-point columns for `count` seeded random elements only (inputs too large for one
        column per element); `directional` covers all elements through random projections."""
        x = self.values[name]
        n_in, n_out = x.numel(), _numel(self.out_shape)
        gen = torch.Generator().manual_seed(seed)
        idx = torch.randperm(n_in, generator=gen)[:count].sort().values.to(x.device)
        h = self.step(name).reshape(-1)
        jac = torch.zeros(n_out, len(idx), dtype=self.dtype, device=x.device)
        err = torch.zeros_like(jac)
        kink = torch.zeros(n_in, dtype=torch.bool, device=x.device)
        col = Columns(name, "sampled", tuple(x.shape), self.out_shape, jac, err,
                      kink.reshape(x.shape), sampled=idx)
        start = 0
        for chunk in self._chunks(idx, n_in, n_out, name):
            est, e, kinks = self._perturb_columns(name, x, chunk, h[chunk], 4)
            col.forward_calls += 4 * len(chunk)
            if self.progress is not None:
                self.progress(len(chunk))
            stop = start + len(chunk)
            jac[:, start:stop], err[:, start:stop] = est, e
            for k, m in kinks.items():
                kink[chunk[m]] = True
                mask = col.kink_by_branch.setdefault(
                    k, torch.zeros(x.shape, dtype=torch.bool, device=x.device))
                mask.view(-1)[chunk[m]] = True
            start = stop
        kink[idx] |= _col_max(err) > UNCONVERGED * (_col_max(jac.abs()) + 1)
        col.note = f"{len(idx):,} of {n_in:,} elements sampled (seeded)"
        self._cache[name] = col
        return col

    def refine(self, name: str, mask: torch.Tensor) -> int:
        """Upgrade the two-point estimates under `mask` (input-shaped: dense columns or
        elementwise elements) to four points with an error estimate; returns how many were
        refined."""
        col = self._cache.get(name)
        if col is None or col.points is None:  # sampled columns have four points already
            return 0
        if col.mode == "elementwise":
            todo_mask = mask.to(col.points.device).reshape(col.points.shape) & (col.points == 2)
            count = int(todo_mask.sum())
            if count:
                self._refine_elementwise(col, todo_mask)
            return count
        todo = torch.nonzero(mask.reshape(-1).to(col.points.device) & (col.points == 2))
        todo = todo.reshape(-1)
        if todo.numel():
            x = self.values[name]
            self._rounds(col, x, todo, self.step(name).reshape(-1)[todo].clone(), points=4)
        return int(todo.numel())

    def _rounds(self, col: Columns, x: torch.Tensor, todo: torch.Tensor, h: torch.Tensor,
                points: int) -> None:
        """Estimate the columns `todo` (steps `h`), retrying kinks and unconverged columns
        with smaller steps, keeping per column the trustworthy estimate."""
        n_in, n_out = x.numel(), _numel(self.out_shape)
        kink = col.kink.view(-1)  # input-shaped outside, indexed per column here
        step = torch.zeros(n_in, dtype=self.dtype, device=x.device)
        step[todo] = h
        first_round = torch.ones(n_in, dtype=torch.bool, device=x.device)
        for round_ in range(REFINE_ROUNDS + 1):
            retry = []
            for idx in self._chunks(todo, n_in, n_out, col.name):
                use = points if round_ == 0 else 4
                est, e, kinks = self._perturb_columns(col.name, x, idx, step[idx], use)
                col.forward_calls += use * len(idx)
                new_kink = torch.zeros(len(idx), dtype=torch.bool, device=x.device)
                for m in kinks.values():
                    new_kink |= m
                # Keep the trustworthy estimate per column: whatever the first round gave,
                # then off-kink first, then the smaller error.
                col_err, old_err = _col_max(e), _col_max(col.error[:, idx])
                better = first_round[idx] | (~new_kink & (kink[idx] | (col_err < old_err)))
                first_round[idx] = False
                keep = idx[better]
                col.partial[:, keep], col.error[:, keep] = est[:, better], e[:, better]
                kink[keep] = new_kink[better]
                col.points[keep] = use
                for k in set(col.kink_by_branch) | set(kinks):
                    mask = col.kink_by_branch.setdefault(
                        k, torch.zeros(n_in, dtype=torch.bool, device=x.device))
                    mask.view(-1)[keep] = kinks[k][better] if k in kinks else False
                needs = new_kink.clone()
                if use == 4:  # only an extrapolated estimate knows its truncation error
                    needs |= col_err > REFINE_ERROR * (_col_max(est.abs()) + 1)
                retry.append(idx[needs])
                if self.progress is not None and round_ == 0:
                    self.progress(len(idx))
            todo = torch.cat(retry) if retry else todo[:0]
            if round_ == REFINE_ROUNDS or todo.numel() == 0:
                break
            step[todo] = step[todo] / REFINE_FACTOR
        extrapolated = col.points == 4
        unconverged = _col_max(col.error) > UNCONVERGED * (_col_max(col.partial.abs()) + 1)
        kink |= extrapolated & unconverged
        col.kink_by_branch = {k: m.reshape(col.in_shape) if m.shape != col.in_shape else m
                              for k, m in col.kink_by_branch.items() if bool(m.any())}

    def _chunks(self, todo: torch.Tensor, n_in: int, n_out: int, name: str | None = None):
        size = self._chunk_size(name, n_in, n_out)
        for start in range(0, todo.numel(), size):
            yield todo[start:start + size]

    def _chunk_size(self, name: str | None, n_in: int, n_out: int) -> int:
        """Columns per batch, sized for the four-point stencil."""
        columns = self._columns(name) if name is not None else None
        if columns is not None:  # no perturbed copies: a column costs its widest node
            widest = max(n_out, columns.width, 1)
        else:
            widest = max(n_in, n_out, max((b.numel() for b in self.branches), default=1), 1)
        return max(1, BATCH_ELEMENTS // (4 * widest))  # (4: the column evaluator's points)

    def column_width(self, name: str) -> int | None:
        """Per-column storage of the target's column evaluator for `name` (elements), or None
        when columns need a whole evaluation each."""
        columns = self._columns(name)
        return None if columns is None else max(1, columns.width)

    def _columns(self, name: str) -> Any:
        """The target's column evaluator for `name` when it supports this expression (tried
        once on one column; `Unsupported` means vmap batches instead), else None."""
        if name not in self.column_fn:
            fn = self._column_fns(name) if self._column_fns is not None else None
            if fn is not None:
                try:
                    one = torch.zeros(1, dtype=torch.long, device=self.out.device)
                    fn(one, self.step(name).reshape(-1)[:1])
                except Unsupported:
                    fn = None
                except Exception:  # a case the evaluator does not foresee: the general way
                    fn = None
            self.column_fn[name] = fn
        return self.column_fn[name]

    def _perturb_columns(self, name: str, x: torch.Tensor, idx: torch.Tensor, h: torch.Tensor,
                         points: int = 4):
        k = len(idx)
        columns = self._columns(name)
        if columns is not None:
            scales = torch.tensor(STENCIL[:points], dtype=self.dtype,
                                  device=x.device).repeat_interleave(k)
            try:
                outs, flags = columns(idx.repeat(points), scales * h.repeat(points))
            except Exception:  # never seen; the general batches are the reference anyway
                self.column_fn[name] = None
                return self._perturb_in_chunks(name, x, idx, h, points)
            outs = outs.reshape(points, k, -1).transpose(1, 2)  # (points, n_out, k)
            est, err = _estimate(outs, h.unsqueeze(0), self.machine_eps)
            kinks = {j: f.reshape(points, k).any(0) for j, f in flags.items() if bool(f.any())}
            return est, err, kinks
        if k > self._chunk_size(name, x.numel(), _numel(self.out_shape)):
            return self._perturb_in_chunks(name, x, idx, h, points)  # sized for copies
        # One stencil point at a time: a batch holds k perturbed copies, not 4k (a single
        # column of a 20M-element input is 160 MB per copy).
        flat = x.reshape(-1)
        rows = torch.arange(k, device=x.device)
        per_point, kinks = [], {}
        for scale in STENCIL[:points]:
            batch = flat.expand(k, flat.numel()).clone()
            batch[rows, idx] += scale * h
            out, branches = self._batched(name, batch.reshape(k, *x.shape))
            per_point.append(out.reshape(k, -1).transpose(0, 1))  # (n_out, k)
            del batch
            for j, (b, b0) in enumerate(zip(branches, self.branches, strict=True)):
                changed = branch_changed(b, b0.unsqueeze(0)).reshape(k, -1).any(-1)
                kinks[j] = kinks[j] | changed if j in kinks else changed
        est, err = _estimate(per_point, h.unsqueeze(0), self.machine_eps)
        return est, err, {j: m for j, m in kinks.items() if bool(m.any())}

    def _perturb_in_chunks(self, name: str, x: torch.Tensor, idx: torch.Tensor,
                           h: torch.Tensor, points: int):
        """_perturb_columns over vmap-sized pieces of `idx` (a chunk sized for the column
        evaluator can be far too large for perturbed copies)."""
        pieces = [self._perturb_columns(name, x, idx[part], h[part], points)
                  for part in self._chunks(torch.arange(len(idx), device=idx.device),
                                           x.numel(), _numel(self.out_shape), name)]
        est = torch.cat([p[0] for p in pieces], dim=1)
        err = torch.cat([p[1] for p in pieces], dim=1)
        kinks: dict[int, torch.Tensor] = {}
        for j in {j for p in pieces for j in p[2]}:
            kinks[j] = torch.cat([p[2].get(j, torch.zeros(p[0].shape[1], dtype=torch.bool,
                                                          device=x.device)) for p in pieces])
        return est, err, kinks

    def _batched(self, name: str, batch: torch.Tensor):
        fn = self._fn(name)

        def one(xi: torch.Tensor):
            vals = dict(self.values)
            vals[name] = xi
            out, branches = fn(vals)
            return out, tuple(branches)

        if self.vmap_failed is None:
            try:
                out, branches = torch.func.vmap(one)(batch)
                return out, list(branches)
            except Exception as exc:  # ops without a batching rule: fall back to a loop
                self.vmap_failed = f"vmap unavailable: {str(exc).splitlines()[0][:80]}"
        results = [one(xi) for xi in batch]
        out = torch.stack([r[0].expand(self.out_shape) for r in results])
        branches = [torch.stack([r[1][j] for r in results]) for j in range(len(self.branches))]
        return out, branches

    # ------------------------------------------------------------ forward mode: J·t
    def directional(self, tangents: Mapping[str, torch.Tensor]) -> Directional:
        """J·t by perturbing every input along its tangent at once (four forward calls)."""
        t = {k: v.to(self.dtype) for k, v in tangents.items()}
        size = max((float(v.abs().max()) if v.numel() else 0.0) for v in t.values())
        if size == 0.0:
            zeros = torch.zeros(self.out_shape, dtype=self.dtype, device=self.out.device)
            return Directional(zeros, zeros, zeros.bool())
        big = max(1.0, max(float(v.abs().max()) for v in self.values.values()))
        h = self.eps * big / size
        outs, changed = [], torch.zeros(self.out_shape, dtype=torch.bool,
                                        device=self.out.device)
        for scale in (1.0, -1.0, 0.5, -0.5):
            vals = {k: v + scale * h * t[k] if k in t else v for k, v in self.values.items()}
            out, branches = self.fn(vals)
            outs.append(out.expand(self.out_shape))
            for b, b0 in zip(branches, self.branches, strict=True):
                diff = branch_changed(b, b0)
                if bool(diff.any()):
                    try:
                        changed |= diff.expand(self.out_shape) if diff.ndim <= len(
                            self.out_shape) else diff.any()
                    except RuntimeError:  # a reduction lies in between: every output moves
                        changed |= True
        h_t = torch.tensor(h, dtype=self.dtype, device=self.out.device)
        est, err = _richardson(*outs, h_t, self.machine_eps)
        return Directional(est, err, changed)

