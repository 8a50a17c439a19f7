"""`--order 2`: a target whose output is the first-order VJP (with `create_graph=True`), so
the engines check double backward the way gradgradcheck does."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from gradscope.inputs.bind import Upstream
from gradscope.targets.base import Target, TracedOutput


class SecondOrderTarget(Target):
    """The first-order VJP of `base` for the inner upstream `upstream` (None: ones), its
    inputs concatenated into one output: its backward is double backward."""

    def __init__(self, base: Target, upstream: Upstream | None = None) -> None:
        super().__init__(f"∂/∂inputs of VJP[{base.text}]", f"{base.kind} (order 2)")
        self.base = base
        self.upstream = upstream or Upstream()
        self.given, self.parameters = base.given, base.parameters
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
