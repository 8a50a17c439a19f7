"""The Engine protocol: the questions every engine answers about one target at fixed inputs,
each in its own way and without asking another engine.

* `AutogradEngine` — what PyTorch computes (`y.backward(v)`, forward-mode AD);
* `SymbolicEngine` — sympy derivatives of an expression, evaluated with torch;
* `FiniteDifferences` — central differences with Richardson extrapolation and error bounds
  (its `estimate(name)` keeps the per-element error and kink masks the comparison needs).

The runner lays their answers side by side; `verdict/` judges them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

import torch


@runtime_checkable
class Engine(Protocol):
    output: torch.Tensor  # the target's value at the inputs

    def vjp(self, upstream: torch.Tensor) -> dict[str, torch.Tensor]:
        """vᵀJ for every input, shaped like the input."""
        ...

    def jvp(self, tangents: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """J·t summed over the inputs, shaped like the output."""
        ...
