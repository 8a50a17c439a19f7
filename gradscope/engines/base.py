"""What every engine answers and how: the `Engine` protocol (the questions about one target at
fixed inputs, each engine answering in its own way without asking another) and `Answer`, one
engine's answer for one input, which the comparison lays beside autograd.

* `AutogradEngine` — what PyTorch computes (`y.backward(v)`, forward-mode AD): the thing
  being checked;
* `SymbolicEngine` — sympy derivatives of an expression, evaluated with torch (exact);
* `FiniteDifferences` — central differences with Richardson extrapolation and error bounds.

The runner turns each reference engine's answers into `Answer`s (evidence/references.py, one
adapter and one registration per engine); `compare/` judges them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Answer:
    """One reference engine's answer for one input (a VJP, a Jacobian (out_numel, in_numel),
    or a JVP): its `values`; its own `error` bound where it is an estimate; `kink`, where its
    answer is no derivative (a stencil straddled a kink, jump or pole; broadcast against the
    values); `checked`, the elements it answered (a sample; None: all)."""

    values: torch.Tensor
    error: torch.Tensor | None = None
    kink: torch.Tensor | None = None
    checked: torch.Tensor | None = None


def estimated(answers: Mapping[str, Answer]) -> Answer | None:
    """The first answer that is an estimate (carries its own error bound), if any."""
    return next((a for a in answers.values() if a.error is not None), None)
