"""The Target protocol: what the runner and the engines may ask of the thing being checked.

Every target (an expression, Python code, a second-order wrapper, and later a model) offers the
same members; engines receive only the callables they need (`forward`, `traced`), never the
target itself, so they stay independent of how it was written.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import torch

# forward(values) -> output, with every input a tensor by name
# traced(values) -> (output, branch ids of the kinky ops in a fixed order)
Traced = tuple[torch.Tensor, list[torch.Tensor]]


@dataclass
class Sourced:
    """A forward's output with what its evaluation learned of the graph: each grad_fn's op
    and source text (expressions), the module it ran in (models), and the ops whose output
    is NaN/inf from finite inputs, as (op, where, inputs below, count, module or None)."""

    output: torch.Tensor
    where: Mapping[int, tuple[str, str]] = field(default_factory=dict)
    forward_nan: list[tuple[str, str, tuple[str, ...], int, str | None]] = field(
        default_factory=list)
    modules: Mapping[int, str] = field(default_factory=dict)
    keep: list[Any] = field(default_factory=list)  # grad_fns the ids above belong to
    entered: list[str] = field(default_factory=list)  # models: module paths in forward order


@runtime_checkable
class Target(Protocol):
    text: str  # how the user named it, for headers and diagnostics
    kind: str  # "expression", "function", "module", ...

    @property
    def target_kind(self) -> str: ...

    @property
    def names(self) -> tuple[str, ...]: ...  # the inputs, in order

    @property
    def notes(self) -> list[str]: ...

    @property
    def elementwise_inputs(self) -> set[str]: ...  # inputs the output depends on elementwise

    @property
    def is_elementwise(self) -> bool: ...

    # tensors the target brings (API positionals; a Module's parameters) and its kinky ops
    given: dict[str, torch.Tensor]
    parameters: dict[str, torch.Tensor]
    branch_sites: list
    # traced_around(base) for targets that reuse work between nearby points (expressions),
    # else None: see engines.fd.engine.Around
    traced_around: Callable[..., Any] | None

    def roles(self) -> dict[str, str]: ...  # name → "input" or "parameter"

    def domain(self, name: str) -> tuple[float, float] | None: ...  # where random values lie

    def forward(self, values: Mapping[str, torch.Tensor]) -> torch.Tensor: ...

    def traced(self, values: Mapping[str, torch.Tensor]) -> Traced: ...
