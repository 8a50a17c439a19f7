"""`--order 2`: a target whose output is the first-order VJP (with `create_graph=True`), so
the engines check double backward the way gradgradcheck does."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from gradscope.inputs.bind import upstream_for


@dataclass
class SecondOrderTarget:
    """`--order 2`: the target whose output is the first-order VJP (with `create_graph=True`),
    so the engines check double backward the way gradgradcheck does."""

    base: Any
    upstream: Any = None  # the inner upstream value (None: ones)
    branch_sites: list = field(default_factory=list)
    traced_around: None = None  # every point is evaluated in full

    @property
    def given(self) -> dict[str, torch.Tensor]:
        return self.base.given

    @property
    def parameters(self) -> dict[str, torch.Tensor]:
        return self.base.parameters

    @property
    def text(self) -> str:
        return f"∂/∂inputs of VJP[{self.base.text}]"

    @property
    def kind(self) -> str:
        return self.base.kind

    @property
    def target_kind(self) -> str:
        return f"{self.base.target_kind} (order 2)"

    @property
    def names(self) -> tuple[str, ...]:
        return self.base.names

    def hold(self, constants: Any) -> None:
        self.base.hold(constants)

    @property
    def notes(self) -> list[str]:
        return [*self.base.notes, "order 2: the output is the first-order VJP, concatenated over "
                "the inputs; its backward is double backward"]

    def roles(self) -> dict[str, str]:
        return self.base.roles()

    @property
    def elementwise_inputs(self) -> set[str]:
        return set()

    @property
    def is_elementwise(self) -> bool:
        return False

    def domain(self, name: str) -> tuple[float, float] | None:
        return self.base.domain(name)

    def forward(self, values: Mapping[str, torch.Tensor]) -> torch.Tensor:
        leaves = {k: v if v.requires_grad else v.detach().requires_grad_() for k, v in
                  values.items()}
        with torch.enable_grad():
            out = self.base.forward(leaves)
            v = upstream_for(self.upstream, out)
            grads = torch.autograd.grad(out, list(leaves.values()), v, create_graph=True,
                                        allow_unused=True)
        flat = torch.cat([g.reshape(-1) if g is not None else torch.zeros_like(x).reshape(-1)
                          for g, x in zip(grads, leaves.values(), strict=True)])
        if not flat.requires_grad and any(x.requires_grad for x in values.values()):
            # The first-order gradient does not depend on the inputs at all (x -> 3x, or a
            # straight-through backward): its derivative is zero, and autograd should say so.
            flat = flat + sum((x * 0).sum() for x in leaves.values())
        return flat

    def traced(self, values: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, list]:
        return self.forward(values).detach(), []
