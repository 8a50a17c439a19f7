"""The one policy for the finite-difference step: its default, the step of an element, the
step for a target that computes in a lower precision than it is given, and the range a step may
take. The options (their help and validation), the runner, the gradcheck drop-in and
`gradscope sweep` all read it here. Its numbers need no torch (the options read them for
`gradscope --help`); its functions import torch when called."""

from __future__ import annotations

from typing import Any

# Relative finite-difference step (float64 unless the target forbids it): h = eps·max(1, |x|).
DEFAULT_EPS = 1e-4
MIN_EPS = 1e-12  # a relative step below this measures round-off, not the derivative
MAX_EPS = 0.1


def step_of(x: Any, eps: float) -> Any:
    """h = eps·max(1, |x|) for every element of the tensor x (a new tensor)."""
    return x.abs().clamp_(min=1.0).mul_(eps)


def scalar_step(x: float, eps: float) -> float:
    """The same step for one number."""
    return eps * max(1.0, abs(x))


def clamped(eps: float) -> float:
    """A relative step inside [MIN_EPS, MAX_EPS] (the drop-in takes torch's absolute eps)."""
    return min(max(eps, MIN_EPS), MAX_EPS)


def low_precision_eps(dtype: Any) -> float:
    """The step for a computation in the torch dtype `dtype` below float64: eps^(1/3) balances
    truncation (~h²) against round-off (~eps/h)."""
    import torch

    return float(torch.finfo(dtype).eps) ** (1 / 3)


def eps_for(given: float | None, computed: Any, checked: Any) -> float:
    """The relative step of a run: the one given (--eps), else one that suits the lowest
    precision the target computes in (a torch dtype) when that is below the check's, else
    the default."""
    import torch

    if given:
        return given
    if computed != torch.float64 and computed != checked:
        return low_precision_eps(computed)
    return DEFAULT_EPS
