"""Questions about the target's structure that finite differences answer by evaluating it at
chosen points: whether an input is elementwise (each output element moves with its own input
element only), and whether the output depends on an element at all (a step, or nothing)."""

from __future__ import annotations

import torch

from gradscope.engines.fd.point import Point, Traced
from gradscope.errors import TargetError
from gradscope.tensors import any_to_shape, branch_changed

# Values an element is set to, to see whether the output depends on it at all (times the
# input's scale max(1, |x|); None: the element's own value negated).
PROBES = (None, 0.0, 0.5, -0.5, 2.0, -2.0, 10.0, -10.0, 100.0, -100.0)
PROBED_ELEMENTS = 128  # elements probed one by one; the rest in groups of PROBE_GROUP
# a far move of some elements may move the others by round-off only (a solver iterating every
# element together stops at another step): the square root of the precision, of their scale
FAR_ROUNDOFF = {torch.float64: 1.5e-8, torch.float32: 3.5e-4, torch.float16: 3e-2,
                torch.bfloat16: 9e-2}
PROBE_GROUP = 128  # (at most 10 forward calls per element or group: bounded for models)


class Prober:
    def __init__(self, point: Point) -> None:
        self.point = point
        self.calls: dict[str, int] = {}  # input → forward calls its elementwise probe took

    def elementwise(self, name: str) -> bool:
        """True when each output element moves with at most one element of `name`, the one
        broadcast to it, at this point and step. For every bit b of the element index, the
        elements whose bit is 1 (then 0) move by their step at once; an output element that
        changes although its own input element stayed depends on another one. Two indices
        differ in some bit, so every pair is tried in 2·log2(n) forward calls. A dependence too
        weak to change the output at this step is invisible to the comparison as well."""
        point = self.point
        x = point.values[name]
        n = x.numel()
        self.calls[name] = 0
        try:
            if torch.broadcast_shapes(tuple(x.shape), point.out_shape) != point.out_shape:
                return False
        except RuntimeError:
            return False
        fn = point.moving(name)
        index = torch.arange(n, device=x.device).reshape(x.shape)
        moved = torch.add(x, point.step(name))
        for bit in range(max(1, (n - 1).bit_length())):
            ones = ((index >> bit) & 1).bool()
            for chosen in (ones, ~ones):
                vals = dict(point.values)
                vals[name] = torch.where(chosen, moved, x)
                try:
                    out, _ = fn(vals)
                except TargetError:  # the target rejects these points: no structure is
                    return False  # assumed (the columns find what it rejects, one by one)
                self.calls[name] += 1
                changed = branch_changed(out.expand(point.out_shape),
                                         point.out.expand(point.out_shape))
                if bool((changed & ~chosen.expand(point.out_shape)).any()):
                    return False
        return self._far_alone(fn, name, index)

    def _far_alone(self, fn: Traced, name: str, index: torch.Tensor) -> bool:
        """The claim verified before it changes what is checked: the even elements, then the
        odd ones, moved far (past every other element) leave the other outputs where they were
        but for round-off (a top-k's mask, a sort's order, change then; an elementwise
        function's other outputs do not, and a solver iterating all elements together moves
        them by its last digits: FAR_ROUNDOFF of their scale). A target that rejects such
        points keeps what the steps showed. Two forward calls."""
        point = self.point
        x = point.values[name]
        if x.numel() < 2 or not x.is_floating_point():
            return True
        far = torch.add(x, 10 * max(1.0, float(x.detach().abs().max().nan_to_num(0.0))))
        base = point.out.expand(point.out_shape)
        finite = torch.isfinite(base)
        scale = float(base[finite].abs().max()) if bool(finite.any()) else 1.0
        allowed = FAR_ROUNDOFF[base.dtype] * max(1.0, scale) if base.is_floating_point() \
            else 0.0
        for chosen in ((index & 1).bool(), ~(index & 1).bool()):
            vals = dict(point.values)
            vals[name] = torch.where(chosen, far, x)
            try:
                out, _ = fn(vals)
            except TargetError:
                return True
            self.calls[name] += 1
            out = out.expand(point.out_shape)
            others = ~chosen.expand(point.out_shape) & finite
            # (NaN where it was finite moved too)
            moved = ~((out - base).abs() <= allowed) if out.is_floating_point() \
                else out != base
            if bool((moved & others).any()):
                return False
        return True

    def depends(self, name: str, flat: torch.Tensor, elementwise: bool,
                budget: int = PROBED_ELEMENTS) -> torch.Tensor:
        """For the elements of `name` at flat positions `flat`: whether the output changes
        when that element alone is set to other values (PROBES, relative to the input's
        scale). True: the forward is piecewise constant there (a step, a saturated clamp);
        False: it ignores the element at every value tried (a zeroed column). Past `budget`
        elements the rest are probed in groups (a group that moves the output counts for all
        its elements)."""
        x = self.point.values[name]
        scale = max(1.0, float(x.abs().max())) if x.numel() else 1.0
        fn = self.point.moving(name)
        if elementwise:  # each output element tells about its own input element
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
        x = self.point.values[name]
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
        point = self.point
        x = point.values[name]
        shifted = x.reshape(-1).clone()
        base = shifted[where]
        shifted[where] = -base if probe is None else torch.full_like(base, probe * scale)
        values = dict(point.values)
        values[name] = shifted.reshape(x.shape)
        try:
            out, _ = fn(values)
        except Exception:
            return None
        return branch_changed(out.expand(point.out_shape), point.out)
