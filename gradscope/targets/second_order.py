"""`--order 2`: a target whose output is the first-order VJP (with `create_graph=True`), so
the engines check double backward the way gradgradcheck does."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from gradscope.errors import UsageError
from gradscope.inputs.bind import Upstream
from gradscope.targets.base import Target, TracedOutput
from gradscope.tensors import once_differentiable_in
from gradscope.usercode import backward_location


class SecondOrderTarget(Target):
    """The first-order VJP of `base` for the inner upstream `upstream` (None: ones), its
    inputs concatenated into one output: its backward is double backward."""

    def __init__(self, base: Target, upstream: Upstream | None = None) -> None:
        super().__init__(f"∂/∂inputs of VJP[{base.text}]", f"{base.kind} (order 2)")
        self.base = base
        self.upstream = upstream or Upstream()
        self.given, self.parameters = base.given, base.parameters
        self._looked = False  # (its graph looked at for once-differentiable backwards)
        self.notes = [*base.notes, "order 2: the output is the first-order VJP, concatenated "
                      "over the inputs; its backward is double backward"]

    @property
    def names(self) -> tuple[str, ...]:
        return self.base.names

    def roles(self) -> dict[str, str]:
        return self.base.roles()

    def hold(self, constants: Mapping[str, torch.Tensor]) -> None:
        self.base.hold(constants)

    def ready(self) -> None:
        self.base.ready()
        super().ready()

    def observed(self) -> list[str]:
        return self.base.observed()

    def finished(self) -> None:
        self.base.finished()

    def reinstate(self, values: Mapping[str, torch.Tensor]) -> None:
        self.base.reinstate(values)

    def domain(self, name: str) -> tuple[float, float] | None:
        return self.base.domain(name)

    def suggested_shape(self, name: str) -> tuple[tuple[int, ...], str] | None:
        return self.base.suggested_shape(name)

    def guessed(self, given: set[str]) -> list[str]:
        return self.base.guessed(given)

    @property
    def runs_user_code(self) -> bool:
        return self.base.runs_user_code

    def symbolic(self) -> str:
        return ("--order 2 differentiates torch's own first-order VJP, which has no symbolic "
                "form (autograd is compared with finite differences)")

    def perturbed_failure(self, exc: BaseException) -> str:
        return self.base.perturbed_failure(exc)

    def forward(self, values: Mapping[str, torch.Tensor]) -> torch.Tensor:
        leaves = {k: v if v.requires_grad else v.detach().requires_grad_() for k, v in
                  values.items()}
        with torch.enable_grad():
            out = self.base.forward(leaves)
            if not self._looked:
                self._looked = True
                _refuses_order_2(out)
            v = self.upstream.tensor_for(out)
            grads = torch.autograd.grad(out, list(leaves.values()), v, create_graph=True,
                                        allow_unused=True)
        flat = torch.cat([g.reshape(-1) if g is not None else torch.zeros_like(x).reshape(-1)
                          for g, x in zip(grads, leaves.values(), strict=True)])
        if not flat.requires_grad and any(x.requires_grad for x in values.values()):
            # The first-order gradient does not depend on the inputs at all (x -> 3x, or a
            # straight-through backward): its derivative is zero, and autograd should say so.
            flat = flat + sum((x * 0).sum() for x in leaves.values())
        return flat

    def traced(self, values: Mapping[str, torch.Tensor]) -> TracedOutput:
        return self.forward(values).detach(), []


def _refuses_order_2(output: torch.Tensor) -> None:
    """A backward decorated with `@once_differentiable` cannot be differentiated again: torch
    raises or (where the inner upstream is a constant) its second derivative reads as 0 — what
    the user needs is the reason and the way on, not a mismatch."""
    found = once_differentiable_in(output)
    if found:
        where = backward_location(found[0])
        raise UsageError(f"--order 2: {found[0].__name__}.backward"
                         f"{f' ({where})' if where else ''} is decorated with "
                         "@once_differentiable, so torch cannot differentiate it a second time; "
                         "check order 1, or drop the decorator where that backward is written "
                         "in differentiable torch operations")
