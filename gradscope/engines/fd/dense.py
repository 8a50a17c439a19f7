"""Dense inputs: one Jacobian column per element. Columns are evaluated incrementally where the
target offers a column evaluator (no perturbed copies), else in memory-bounded `vmap` batches
(a Python loop when the target cannot be vmapped); sampled inputs get seeded columns only."""

from __future__ import annotations

import warnings
from typing import Any

import torch

from gradscope.engines.fd.result import Estimate
from gradscope.engines.fd.stencil import (
    BATCH_ELEMENTS,
    REFINE_ERROR,
    REFINE_FACTOR,
    REFINE_ROUNDS,
    STENCIL,
    UNCONVERGED,
    col_max,
    estimate,
    numel,
)
from gradscope.tensors import branch_changed

MODEL_BATCH = 256  # columns per vmapped call of a whole model
MODEL_BATCH_ELEMENTS = 1 << 25  # activations one such call may hold (256 MB in float64)
# What torch says about its own vmap internals (a fallback, an out= resize): not the user's
# business, since the batching is gradscope's.
VMAP_NOTES = ("There is a performance drop because we have not yet implemented the batching",
              "An output with one or more elements was resized")


class DenseDifferences:
    """The column-by-column half of `FiniteDifferences` (which provides values, steps and
    `_fn`)."""

    # ------------------------------------------------------------ dense: one column per element
    def _dense(self, name: str) -> Estimate:
        """Two-point differences for every column first (half of gradcheck's cost per column
        is what makes dense inputs affordable); `refine` upgrades the columns a comparison
        doubts to the extrapolated four-point estimate with its error bound."""
        x = self.values[name]
        n_in, n_out = x.numel(), numel(self.out_shape)
        col = Estimate(name, "dense", tuple(x.shape), self.out_shape,
                      torch.zeros(n_out, n_in, dtype=self.dtype, device=x.device),
                      torch.zeros(n_out, n_in, dtype=self.dtype, device=x.device),
                      torch.zeros(x.shape, dtype=torch.bool, device=x.device))
        col.points = torch.zeros(n_in, dtype=torch.int8, device=x.device)
        self._rounds(col, x, torch.arange(n_in, device=x.device), self.step(name).reshape(-1),
                     points=2)
        col.note = (f"per-element loop ({self.vmap_failed})" if self.vmap_failed
                    else "vmap batches")
        return col

    def sampled(self, name: str, count: int, seed: int) -> Estimate:
        """Four-point columns for `count` seeded random elements only (inputs too large for one
        column per element); `directional` covers all elements through random projections."""
        x = self.values[name]
        n_in, n_out = x.numel(), numel(self.out_shape)
        gen = torch.Generator().manual_seed(seed)
        idx = torch.randperm(n_in, generator=gen)[:count].sort().values.to(x.device)
        h = self.step_at(name, idx)  # the sampled elements' steps only (not n_in of them)
        jac = torch.zeros(n_out, len(idx), dtype=self.dtype, device=x.device)
        err = torch.zeros_like(jac)
        kink = torch.zeros(n_in, dtype=torch.bool, device=x.device)
        col = Estimate(name, "sampled", tuple(x.shape), self.out_shape, jac, err,
                      kink.reshape(x.shape), sampled=idx)
        start = 0
        for chunk in self._chunks(idx, n_in, n_out, name):
            est, e, kinks = self._perturb_columns(name, x, chunk,
                                                  h[start:start + len(chunk)], 4)
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
        kink[idx] |= col_max(err) > UNCONVERGED * (col_max(jac.abs()) + 1)
        col.note = f"{len(idx):,} of {n_in:,} elements sampled (seeded)"
        self._cache[name] = col
        return col

    def _rounds(self, col: Estimate, x: torch.Tensor, todo: torch.Tensor, h: torch.Tensor,
                points: int) -> None:
        """Estimate the columns `todo` (steps `h`), retrying kinks and unconverged columns
        with smaller steps, keeping per column the trustworthy estimate."""
        n_in, n_out = x.numel(), numel(self.out_shape)
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
                col_err, old_err = col_max(e), col_max(col.error[:, idx])
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
                    needs |= col_err > REFINE_ERROR * (col_max(est.abs()) + 1)
                retry.append(idx[needs])
                if self.progress is not None and round_ == 0:
                    self.progress(len(idx))
            todo = torch.cat(retry) if retry else todo[:0]
            if round_ == REFINE_ROUNDS or todo.numel() == 0:
                break
            step[todo] = step[todo] / REFINE_FACTOR
        extrapolated = col.points == 4
        unconverged = col_max(col.error) > UNCONVERGED * (col_max(col.partial.abs()) + 1)
        kink |= extrapolated & unconverged
        col.kink_by_branch = {k: m.reshape(col.in_shape) if m.shape != col.in_shape else m
                              for k, m in col.kink_by_branch.items() if bool(m.any())}

    def _chunks(self, todo: torch.Tensor, n_in: int, n_out: int, name: str | None = None):
        size = self._chunk_size(name, n_in, n_out)
        for start in range(0, todo.numel(), size):
            yield todo[start:start + size]

    def _chunk_size(self, name: str | None, n_in: int, n_out: int) -> int:
        """Estimate per batch, sized for the four-point stencil: a column costs its widest
        tensor, which for a whole evaluation is the largest of the input, the output and the
        activations one evaluation keeps (measured once); capped where memory ran out."""
        columns = self._columns(name) if name is not None else None
        model = False
        if columns is not None:  # no perturbed copies: a column costs its widest node
            widest = max(n_out, columns.width, 1)
        else:
            tensors = max(n_in, n_out, max((b.numel() for b in self.branches), default=1))
            widest = max(tensors, self.activations(), 1)
            model = widest > tensors
        if model:  # many small ops per evaluation, whose per-call overhead only large batches
            # amortise (measured on a 34k-parameter stack: 0.37 ms per evaluation at 16
            # columns, 0.08 ms at 256)
            size = max(1, min(MODEL_BATCH, MODEL_BATCH_ELEMENTS // widest))
        else:
            size = max(1, BATCH_ELEMENTS // (4 * widest))  # (4: the column evaluator's points)
        return min(size, self.memory_cap.get(name, size)) if name is not None else size

    def column_width(self, name: str) -> int | None:
        """Per-column storage of the target's column evaluator for `name` (elements), or None
        when columns need a whole evaluation each."""
        columns = self._columns(name)
        return None if columns is None else max(1, columns.width)

    def _columns(self, name: str) -> Any:
        """The target's column evaluator for `name` when it supports this expression (tried
        once on one column; any exception means vmap batches instead), else None."""
        if name not in self.column_fn:
            fn = self._column_fns(name) if self._column_fns is not None else None
            if fn is not None:
                try:
                    one = torch.zeros(1, dtype=torch.long, device=self.out.device)
                    fn(one, self.step_at(name, one))
                except Exception:  # the evaluator cannot take this expression (or a case it
                    fn = None  # does not foresee): the general batches instead
            self.column_fn[name] = fn
            dense = [n for n in self.values if n not in self.elementwise]
            if all(self.column_fn.get(n, 0) is None for n in dense):
                # no input can use it: drop the factory and the base node values it keeps
                self._column_fns = None
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
            est, err = estimate(outs, h.unsqueeze(0), self.machine_eps)
            kinks = {j: f.reshape(points, k).any(0) for j, f in flags.items() if bool(f.any())}
            return est, err, kinks
        if k > self._chunk_size(name, x.numel(), numel(self.out_shape)):
            return self._perturb_in_chunks(name, x, idx, h, points)  # sized for copies
        try:
            return self._perturb_copies(name, x, idx, h, points)
        except (RuntimeError, MemoryError) as exc:
            # An estimate of activations can be wrong: on an allocation failure halve the
            # batch (and remember the size for the next ones), down to a single column.
            if k == 1 or not out_of_memory(exc):
                raise
            self.memory_cap[name] = max(1, k // 2)
            half = k // 2
            return _joined([self._perturb_columns(name, x, idx[:half], h[:half], points),
                            self._perturb_columns(name, x, idx[half:], h[half:], points)],
                           x.device)

    def _perturb_copies(self, name: str, x: torch.Tensor, idx: torch.Tensor, h: torch.Tensor,
                        points: int):
        k = len(idx)
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
        est, err = estimate(per_point, h.unsqueeze(0), self.machine_eps)
        return est, err, {j: m for j, m in kinks.items() if bool(m.any())}

    def _perturb_in_chunks(self, name: str, x: torch.Tensor, idx: torch.Tensor,
                           h: torch.Tensor, points: int):
        """_perturb_columns over vmap-sized pieces of `idx` (a chunk sized for the column
        evaluator can be far too large for perturbed copies)."""
        pieces = [self._perturb_columns(name, x, idx[part], h[part], points)
                  for part in self._chunks(torch.arange(len(idx), device=idx.device),
                                           x.numel(), numel(self.out_shape), name)]
        return _joined(pieces, x.device)

    def _batched(self, name: str, batch: torch.Tensor):
        fn = self._fn(name)

        def one(xi: torch.Tensor):
            vals = dict(self.values)
            vals[name] = xi
            out, branches = fn(vals)
            return out, tuple(branches)

        if self.vmap_failed is None:
            try:
                with warnings.catch_warnings():  # torch's notes about its own vmap fallbacks
                    for note in VMAP_NOTES:
                        warnings.filterwarnings("ignore", message=note, category=UserWarning)
                    out, branches = torch.func.vmap(one)(batch)
                return out, list(branches)
            except Exception as exc:  # ops without a batching rule: fall back to a loop
                self.vmap_failed = f"vmap unavailable: {str(exc).splitlines()[0][:80]}"
        results = [one(xi) for xi in batch]
        out = torch.stack([r[0].expand(self.out_shape) for r in results])
        branches = [torch.stack([r[1][j] for r in results]) for j in range(len(self.branches))]
        return out, branches


def _joined(pieces: list, device: torch.device):
    """(estimate, error, kinks) of column pieces, side by side."""
    est = torch.cat([p[0] for p in pieces], dim=1)
    err = torch.cat([p[1] for p in pieces], dim=1)
    kinks: dict[int, torch.Tensor] = {}
    for j in {j for p in pieces for j in p[2]}:
        kinks[j] = torch.cat([p[2].get(j, torch.zeros(p[0].shape[1], dtype=torch.bool,
                                                      device=device)) for p in pieces])
    return est, err, kinks


def out_of_memory(exc: BaseException) -> bool:
    """An allocation failure (CPU or CUDA), as opposed to any other error of the target."""
    if isinstance(exc, MemoryError):
        return True
    text = str(exc).lower()
    return any(s in text for s in ("out of memory", "can't allocate memory",
                                   "cannot allocate memory", "not enough memory"))
