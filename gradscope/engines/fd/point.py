"""The point finite differences work around: the target's traced function (its output read in
the engine's dtype), the inputs, the output and branch ids there, the step of every element,
and what one evaluation costs (counted once, never timed)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

from gradscope.engines.fd import flops
from gradscope.engines.fd.policy import step_of
from gradscope.engines.fd.stencil import unconverged_limit
from gradscope.expr.ops import costs
from gradscope.tensors import as_leaves, moved_by, own_work

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


def read_as(fn: Traced, dtype: torch.dtype) -> Traced:
    """`fn` with its floating output read in `dtype` (buffers are written in `dtype`), detached."""

    def read(values: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, list[torch.Tensor]]:
        out, branches = fn(values)
        out = out.detach()  # a target that builds a graph (a VJP with create_graph) keeps none
        if out.is_floating_point() and out.dtype != dtype:
            out = out.to(dtype)
        return out, branches

    return read


class Point:
    """The base evaluation every perturbation is measured from. A target may compute in a lower
    precision than it is given (a forward ending in `.float()`): its outputs are read in
    `dtype`, and its round-off is that of the lowest precision seen (`round_off`, or its first
    output's dtype). `find_kinks`: the target reports no branch ids for its kinks (code
    gradscope cannot read), so the stencil looks for them in f itself (stencil.kinked)."""

    def __init__(self, fn: Traced, values: Mapping[str, torch.Tensor], *, eps: float,
                 dtype: torch.dtype = torch.float64, around: Around | None = None,
                 round_off: torch.dtype | None = None, find_kinks: bool = False) -> None:
        self.fn = read_as(fn, dtype)
        self.find_kinks = find_kinks
        self.dtype = dtype
        self.eps = eps
        self.values = {k: v.detach().to(dtype) for k, v in values.items()}
        self._moving: Callable[[str], Traced] | None = None
        self.column_factory: Callable[[str], Any] | None = None
        if around is not None:  # the target can reuse work for points that move one input
            out, self.branches, moving, self.column_factory = around(self.values)
            self._moving = lambda name: read_as(moving(name), dtype)
        else:
            out, self.branches = fn(self.values)
        self.out = out.to(dtype) if out.is_floating_point() and out.dtype != dtype else out
        self.machine_eps = max(float(torch.finfo(d).eps) for d in (dtype, out.dtype, round_off)
                               if d is not None and d.is_floating_point)
        # an error bound beyond this fraction of its estimate has not converged
        self.unconverged = unconverged_limit(self.machine_eps)
        self.out_shape = tuple(self.out.shape)
        self._activations: int | None = None
        self._flops: int | None = None
        self._elements: int | None = None
        self._noise: torch.Tensor | None = None
        self._roundoff: torch.Tensor | None = None

    def moving(self, name: str) -> Traced:
        """The target, for points that differ from the base values in `name` only."""
        return self._moving(name) if self._moving is not None else self.fn

    def step(self, name: str) -> torch.Tensor:
        """The step of every element of `name` (policy.step_of)."""
        return step_of(self.values[name], self.eps)

    def step_at(self, name: str, flat: torch.Tensor) -> torch.Tensor:
        """The steps of the elements at these flat positions only."""
        return step_of(self.values[name].reshape(-1)[flat], self.eps)

    def flops(self) -> int:
        """Floating-point operations one evaluation performs (matmuls, convolutions: what
        torch's FlopCounterMode counts), counted once: what an expensive target costs beyond
        its size, as a number that does not depend on how loaded the machine is."""
        if self._flops is None:
            self._measure()
        return self._flops  # type: ignore[return-value]

    def elements(self) -> int:
        """Elements one evaluation computes: every tensor a torch function returns, summed
        (an outer product's matrix, every layer of a nested sin), counted once with
        `flops`. What an evaluation costs where FlopCounterMode counts nothing (elementwise
        work), and what a batch of evaluations holds."""
        if self._elements is None:
            self._measure()
        return self._elements  # type: ignore[return-value]

    def noise(self) -> torch.Tensor:
        """The round-off of f at the base point, per output element (output-shaped), measured
        once: f moved by every input's last bits (±2 ulps, seeded signs): the least of each
        side's change and their second difference (which has no slope in it). A sum of
        millions of terms that cancel (`sum(sin(outer(x, y)))` with a symmetric y) rounds far
        above eps·|f|, and a central difference divides that by h; |f| alone would call its
        noise a mismatch. A jump within the ulps moves one side only, so the side that stays
        never takes a jump for noise; NaN counts as none."""
        if self._noise is None:
            self._noise = self._measure_noise()
        return self._noise

    def roundoff_scale(self) -> torch.Tensor:
        """Output-shaped 3·(2·eps·|f| + f's noise): divided by a step, the round-off a
        four-point estimate at that step carries (stencil.richardson's bound, with f at the
        base point for f at the stencil's), computed once."""
        if self._roundoff is None:
            self._roundoff = self.out.abs().mul(2 * self.machine_eps).add_(self.noise()).mul_(3)
        return self._roundoff

    @torch.no_grad()
    def _measure_noise(self) -> torch.Tensor:
        if not self.out.is_floating_point():
            return torch.zeros(self.out_shape, dtype=self.dtype)
        # (in place where it can be: at 20M elements each temporary is 160 MB)
        sides: list[torch.Tensor] = []
        scratch: dict[str, torch.Tensor] = {}  # (one moved copy for both sides)
        try:
            for sign in (1.0, -1.0):  # (the same seeded signs each time: ulp_signs')
                moved = moved_by(self.values, sign * 2 * self.machine_eps, scratch=scratch)
                out, _ = self.fn(moved)
                del moved
                sides.append(torch.sub(out.expand(self.out_shape), self.out))
                del out
        except Exception:  # the target refuses its own point moved by ulps: no estimate
            return torch.zeros_like(self.out)
        # the second difference has no slope in it; each side alone has no jump beyond it
        curved = torch.add(sides[0], sides[1]).abs_()
        found = torch.fmin(sides[0].abs_(), sides[1].abs_(), out=sides[0])
        del sides
        return torch.fmin(found, curved, out=found).nan_to_num_(0.0, 0.0, 0.0)

    def _measure(self) -> None:
        counted = _Elements()

        def run() -> None:
            counted.total = 0  # (a count made again by torch's own mode starts afresh)
            with torch.no_grad(), counted:
                self.fn(self.values)

        try:
            self._flops = flops.count(run)
        except Exception:  # an op the counters cannot follow: count none
            self._flops = 0
        self._elements = counted.total

    def activations(self) -> int:
        """Elements one evaluation keeps alive beyond its inputs: what autograd saves for
        backward in one forward (a fair measure of a model's activations), measured once."""
        if self._activations is None:
            saved = [0]

            def pack(t: torch.Tensor) -> torch.Tensor:
                saved[0] += t.numel()
                return t

            leaves = as_leaves(self.values)
            try:
                with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(
                        pack, lambda t: t):
                    self.fn(leaves)
            except Exception:  # a target that cannot run with a graph: no estimate
                saved[0] = 0
            self._activations = saved[0]
        return self._activations


class _Elements(torch.overrides.TorchFunctionMode):
    """Counts the work of every torch function called: the elements it returns, or those it
    reads where it reads more (a sum over an outer product), times what it does per element
    beyond that (expr/ops/costs.py: log n to sort, n for a factorisation)."""

    def __init__(self) -> None:
        super().__init__()
        self.total = 0

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None
                           ) -> Any:
        out = func(*args, **(kwargs or {}))
        if own_work():  # (gradscope's copy of an input: no work of the target's)
            return out
        written = sum(t.numel() for t in (out if isinstance(out, tuple | list) else (out,))
                      if isinstance(t, torch.Tensor))
        read = sum(t.numel() for t in args if isinstance(t, torch.Tensor))
        self.total += int(max(written, read) * costs.factor(func, args, kwargs)) if written else 0
        return out
