"""Tolerances per dtype and how far a finite-difference estimate may be off: the numbers every
comparison is judged with (the finite-difference step is engines/fd/policy.py's)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # (this module is read without torch: the CLI's help and the fd policy)
    import torch

# (rtol, atol) per dtype of the autograd computation. Symbolic and finite differences run in
# float64, so the autograd dtype sets the error to expect. gradcheck uses 1e-3/1e-5 for float64;
# our finite differences are extrapolated and carry their own error bound, so we can be tighter.
# bfloat16 keeps 8 significant bits: its gradients through a few nested ops drift by ten of its
# epsilons, hence 1e-1 (about 13 of them, as float16's 2e-2 is 20 of its).
DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-6, 1e-9),
    "float32": (5e-4, 1e-5),
    "float16": (2e-2, 2e-3),
    "bfloat16": (1e-1, 2e-2),
}
# How many estimated error bounds a finite-difference value may be off before it counts.
FD_ERROR_FACTOR = 3.0


# Half precisions: a backward's round-off follows the magnitude of the terms it sums (a chain
# rule's products of order one), not each element's own result: an element whose gradient is a
# small difference of large terms (0.11 = 1.5 − 1.39 in float16) is off by their ulps. Their
# default atol is relative to the largest reference value of the tensor compared (at least 1).
SCALED_ATOL = ("float16", "bfloat16")


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float
    scaled: bool = False  # atol × max(1, the largest |reference| of the tensor compared)

    @classmethod
    def for_dtype(cls, dtype: str, rtol: float | None = None,
                  atol: float | None = None) -> Tolerance:
        default_rtol, default_atol = DEFAULT_TOLERANCES[dtype]
        return cls(default_rtol if rtol is None else rtol, default_atol if atol is None else atol,
                   atol is None and dtype in SCALED_ATOL)

    def atol_for(self, ref: torch.Tensor) -> float:
        """The absolute tolerance for one tensor compared (scaled in half precision)."""
        if not self.scaled or not ref.numel():
            return self.atol
        top = ref.abs().nan_to_num_(nan=0.0, posinf=0.0).max()
        return self.atol * max(1.0, float(top))


def tolerance_help(index: int) -> str:
    """'float64 1e-06, float32 0.0005, …' for --rtol (0) or --atol (1) help texts."""
    return ", ".join(f"{d} {t[index]:g}" for d, t in DEFAULT_TOLERANCES.items())
