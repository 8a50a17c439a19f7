"""The point finite differences work around: the target's traced function (its output read in
the engine's dtype), the inputs, the output and branch ids there, the step of every element,
and what one evaluation costs (counted once, never timed)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

from gradscope.engines.fd.policy import step_of

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
        self.out_shape = tuple(self.out.shape)
        self._activations: int | None = None
        self._flops: int | None = None

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
