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
  (`expr.incremental`, O(1) per column); anything else in memory-bounded chunks through
  `torch.func.vmap` (a Python loop only when the target cannot be vmapped).

A target may also report *branch ids* (which piece of each kinky op every element is on). An
element whose stencil changes a branch id straddles a kink, jump or pole: it is retried with
smaller steps and, if it still straddles, marked as such and never compared as a mismatch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

from gradscope.engines.fd.dense import DenseDifferences
from gradscope.engines.fd.elementwise import ElementwiseDifferences
from gradscope.engines.fd.result import Directional, Estimate
from gradscope.engines.fd.stencil import PROBE_FROM, TWO_POINT_FROM, richardson
from gradscope.tensors import any_to_shape, branch_changed

# f(values) -> (output, branch ids in a fixed order)
Traced = Callable[[Mapping[str, torch.Tensor]], tuple[torch.Tensor, list[torch.Tensor]]]
# columns(positions, deltas) -> (outputs (B, *out_shape), {branch index: (B,) changed}): the
# target moved by deltas[b] at flat position positions[b], for every b (see expr.incremental)
ColumnFn = Callable[[torch.Tensor, torch.Tensor],
                    tuple[torch.Tensor, dict[int, torch.Tensor]]]
# around(base) -> (f(base), its branch ids, a factory: input name -> Traced for points that
# move that input only, a factory: input name -> ColumnFn or None)
Around = Callable[[Mapping[str, torch.Tensor]],
                  tuple[torch.Tensor, list[torch.Tensor], Callable[[str], Traced],
                        Callable[[str], Any]]]


def _read_as(fn: Traced, dtype: torch.dtype) -> Traced:
    """`fn` with its floating output read in `dtype` (buffers are written in `dtype`), detached."""

    def read(values: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, list[torch.Tensor]]:
        out, branches = fn(values)
        out = out.detach()  # a target that builds a graph (a VJP with create_graph) keeps none
        if out.is_floating_point() and out.dtype != dtype:
            out = out.to(dtype)
        return out, branches

    return read


# Values an element is set to, to see whether the output depends on it at all (times the
# input's scale max(1, |x|); None: the element's own value negated).
PROBES = (None, 0.0, 0.5, -0.5, 2.0, -2.0, 10.0, -10.0, 100.0, -100.0)
PROBED_ELEMENTS = 128  # elements probed one by one; the rest in groups of PROBE_GROUP
PROBE_GROUP = 128  # (at most 10 forward calls per element or group: bounded for models)


class FiniteDifferences(ElementwiseDifferences, DenseDifferences):
    """Finite differences of a traced target around fixed float64 values."""

    def __init__(self, fn: Traced, values: Mapping[str, torch.Tensor], *,
                 elementwise: set[str], eps: float,
                 progress: Callable[[int], None] | None = None,
                 dtype: torch.dtype = torch.float64,
                 two_point_from: int = TWO_POINT_FROM, around: Around | None = None,
                 probe: bool = False, round_off: torch.dtype | None = None) -> None:
        # A target may compute in a lower precision than it is given (a forward ending in
        # `.float()`): its outputs are read in `dtype`, and its round-off is that of the lowest
        # precision it was seen to produce (`round_off`, or its first output's dtype).
        self.fn = _read_as(fn, dtype)
        self.dtype = dtype
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
        if around is not None:  # the target can reuse work for points that move one input
            out, self.branches, moving, self._column_fns = around(self.values)
            self._moving = lambda name: _read_as(moving(name), dtype)
        else:
            out, self.branches = fn(self.values)
        self.out = out.to(dtype) if out.is_floating_point() and out.dtype != dtype else out
        self.machine_eps = max(float(torch.finfo(d).eps) for d in (dtype, out.dtype, round_off)
                               if d is not None and d.is_floating_point)
        self.out_shape = tuple(self.out.shape)
        self.vmap_failed: str | None = None
        self._cache: dict[str, Estimate] = {}
        self.memory_cap: dict[str, int] = {}  # input → columns per batch that fit in memory
        self._activations: int | None = None
        self._flops: int | None = None

    def flops(self) -> int:
        """Floating-point operations one evaluation performs (matmuls, convolutions: what
        torch's FlopCounterMode counts), counted once: what an expensive target costs beyond
        its size, as a number that does not depend on how loaded the machine is."""
        if self._flops is None:
            from torch.utils.flop_counter import FlopCounterMode

            try:
                with torch.no_grad(), FlopCounterMode(display=False) as counter:
                    self.fn(self.values)
                self._flops = int(counter.get_total_flops())
            except Exception:  # an op the counter cannot follow: count none
                self._flops = 0
        return self._flops

    def activations(self) -> int:
        """Elements one evaluation keeps alive beyond its inputs: what autograd saves for
        backward in one forward (a fair measure of a model's activations), measured once."""
        if self._activations is None:
            saved = [0]

            def pack(t: torch.Tensor) -> torch.Tensor:
                saved[0] += t.numel()
                return t

            leaves = {k: v.detach().requires_grad_(v.is_floating_point())
                      for k, v in self.values.items()}
            try:
                with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(
                        pack, lambda t: t):
                    self.fn(leaves)
            except Exception:  # a target that cannot run with a graph: no estimate
                saved[0] = 0
            self._activations = saved[0]
        return self._activations

    def _fn(self, name: str) -> Traced:
        """The target, for points that differ from the base values in `name` only."""
        return self._moving(name) if self._moving is not None else self.fn

    def step(self, name: str) -> torch.Tensor:
        """h = eps·max(1, |x|) for every element of `name`."""
        return self.values[name].abs().clamp_(min=1.0).mul_(self.eps)

    def step_at(self, name: str, flat: torch.Tensor) -> torch.Tensor:
        """The steps of the elements at these flat positions only."""
        return self.values[name].reshape(-1)[flat].abs().clamp_(min=1.0).mul_(self.eps)

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

    def estimate(self, name: str) -> Estimate:
        if name not in self._cache:
            if name in self.elementwise:
                big = self.values[name].numel() >= self.two_point_from
                self._cache[name] = self._elementwise(name, 2 if big else 4)
            else:
                self._cache[name] = self._dense(name)
        return self._cache[name]

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

    # ------------------------------------------------------------ the Engine protocol, J·t
    @property
    def output(self) -> torch.Tensor:
        return self.out

    def vjp(self, upstream: torch.Tensor) -> dict[str, torch.Tensor]:
        """vᵀJ for every input from its estimate (the Engine protocol; the error bounds and
        kink masks stay in `estimate(name)`)."""
        return {name: self.estimate(name).vjp(upstream.to(self.dtype))[0]
                for name in self.values}

    def jvp(self, tangents: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """J·t along the tangents (the Engine protocol; see `directional`)."""
        return self.directional(tangents).value

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
            vals = {k: torch.add(v, t[k], alpha=scale * h) if k in t else v
                    for k, v in self.values.items()}
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
        est, err = richardson(*outs, h_t, self.machine_eps)
        return Directional(est, err, changed)

    # ------------------------------------------------- does the output depend on an element?
    def depends(self, name: str, flat: torch.Tensor, budget: int = PROBED_ELEMENTS
                ) -> torch.Tensor:
        """For the elements of `name` at flat positions `flat` (where the forward is flat):
        whether the output changes when that element alone is set to other values (PROBES,
        relative to the input's scale). True: the forward is piecewise constant there (a
        step, a saturated clamp); False: it ignores the element at every value tried (a
        zeroed column). Past `budget` elements the rest are probed in groups (a group that
        moves the output counts for all its elements)."""
        x = self.values[name]
        scale = max(1.0, float(x.abs().max())) if x.numel() else 1.0
        fn = self._fn(name)
        if name in self.elementwise:  # each output element tells about its own input element
            return self._each_moves(fn, name, flat, scale)
        out = torch.zeros(len(flat), dtype=torch.bool, device=x.device)
        for k in range(min(budget, len(flat))):
            out[k] = self._moves(fn, name, flat[k:k + 1], scale)
        for start in range(budget, len(flat), PROBE_GROUP):
            out[start:start + PROBE_GROUP] = self._moves(fn, name,
                                                         flat[start:start + PROBE_GROUP], scale)
        return out

    def _each_moves(self, fn: Traced, name: str, flat: torch.Tensor, scale: float
                    ) -> torch.Tensor:
        """`depends` for an elementwise input: all elements move at once, one forward call
        per probe, and the output elements that changed say which input elements count."""
        x = self.values[name]
        moved = torch.zeros(len(flat), dtype=torch.bool, device=x.device)
        for probe in PROBES:
            todo = flat[~moved]
            if not todo.numel():
                break
            changed = self._probe(fn, name, todo, probe, scale)
            if changed is None:  # the target refuses some values: it does look at them
                moved[~moved] = True
                break
            per_input = any_to_shape(changed, tuple(x.shape)).reshape(-1)
            moved[~moved] = per_input[todo]
        return moved

    def _moves(self, fn: Traced, name: str, where: torch.Tensor, scale: float) -> bool:
        for probe in PROBES:
            changed = self._probe(fn, name, where, probe, scale)
            if changed is None or bool(changed.any()):  # (refusing a value is looking at it)
                return True
        return False

    def _probe(self, fn: Traced, name: str, where: torch.Tensor, probe: float | None,
               scale: float) -> torch.Tensor | None:
        """Which output elements change when the elements of `name` at flat positions
        `where` are set to `probe`·scale (None: their negation); None when the target
        raises at those values."""
        x = self.values[name]
        shifted = x.reshape(-1).clone()
        base = shifted[where]
        shifted[where] = -base if probe is None else torch.full_like(base, probe * scale)
        values = dict(self.values)
        values[name] = shifted.reshape(x.shape)
        try:
            out, _ = fn(values)
        except Exception:
            return None
        return branch_changed(out.expand(self.out_shape), self.out)
