"""What finite differences give for one input (`Estimate`: the Jacobian columns or, for an
elementwise input, one partial per output element, with error bounds and kink masks) and for a
direction (`Directional`), and the products the comparison needs (Jᵀv, the Jacobian)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from gradscope.engines.fd.stencil import BATCH_ELEMENTS, numel
from gradscope.tensors import any_to_shape, sum_to_shape


@dataclass
class Estimate:
    """Finite-difference Jacobian information for one input."""

    name: str
    mode: str  # "elementwise" (all elements perturbed at once) or "dense" (one per element)
    in_shape: tuple[int, ...]
    out_shape: tuple[int, ...]
    partial: torch.Tensor  # elementwise: out-shaped ∂f_j/∂x_i(j); dense: (out_numel, in_numel)
    error: torch.Tensor  # same shape as partial
    kink: torch.Tensor  # bool, input-shaped: stencil straddles a kink/jump/pole
    kink_by_branch: dict[int, torch.Tensor] = field(default_factory=dict)  # branch → mask
    forward_calls: int = 0
    note: str = ""
    points: torch.Tensor | None = None  # stencil points per column/element (2, or 4 = refined)
    sampled: torch.Tensor | None = None  # sampled: flat indices of the columns estimated

    @property
    def checked(self) -> torch.Tensor | None:
        """Input-shaped mask of the elements that have an estimate (None: all of them)."""
        if self.sampled is None:
            return None
        mask = torch.zeros(numel(self.in_shape), dtype=torch.bool, device=self.partial.device)
        mask[self.sampled] = True
        return mask.reshape(self.in_shape)

    def vjp(self, v: torch.Tensor, ones: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """(Jᵀv, its error estimate), shaped like the input (NaN where not sampled). `ones`:
        v is all ones (the default upstream), so an elementwise input needs no products."""
        if ones and self.mode == "elementwise" and self.sampled is None:
            return (sum_to_shape(self.partial, self.in_shape),
                    sum_to_shape(self.error, self.in_shape))
        v = v.to(self.partial.dtype)
        if self.sampled is not None:
            flat = v.reshape(-1)
            n_in = numel(self.in_shape)
            grad = torch.full((n_in,), float("nan"), dtype=self.partial.dtype,
                              device=self.partial.device)
            err = torch.zeros_like(grad)
            grad[self.sampled] = flat @ self.partial
            err[self.sampled] = flat.abs() @ self.error
            return grad.reshape(self.in_shape), err.reshape(self.in_shape)
        if self.mode == "elementwise":
            grad = sum_to_shape(v * self.partial, self.in_shape)
            err = sum_to_shape(v.abs() * self.error, self.in_shape)
        else:
            flat = v.reshape(-1)
            grad = (flat @ self.partial).reshape(self.in_shape)
            err = (flat.abs() @ self.error).reshape(self.in_shape)
        return grad, err

    def locally_constant(self, atol: float) -> bool:
        """True when every column away from a kink is zero within its error: the function does
        not change with this input at any point checked (piecewise constant)."""
        smooth = ~self.kink.reshape(-1)
        if self.sampled is not None:
            smooth = smooth[self.sampled]
        return bool(smooth.any()) and not bool(self.nonconstant(atol, first=True).any())

    def nonconstant(self, atol: float, first: bool = False) -> torch.Tensor:
        """Input-shaped mask of the columns away from a kink with an entry beyond
        atol + 3·error: the elements the function changes with (`first`: stop at the first
        block of columns that has one; a dense Jacobian can hold 1e8 entries)."""
        if self.mode == "elementwise":  # one entry per output element: no matrix needed
            beyond = self.partial.abs() > atol + 3 * self.error
            return any_to_shape(beyond, self.in_shape) & ~self.kink
        if self.sampled is not None:
            jac, err = self.partial, self.error
            smooth = ~self.kink.reshape(-1)[self.sampled]
        else:
            jac, err = self.jacobian()
            smooth = ~self.kink.reshape(-1)
        moving = torch.zeros(jac.shape[1], dtype=torch.bool, device=jac.device)
        step = max(1, BATCH_ELEMENTS // max(1, jac.shape[0]))
        for start in range(0, jac.shape[1], step):
            block = slice(start, start + step)
            moving[block] = (jac[:, block].abs() > atol + 3 * err[:, block]).any(0)
            if first and bool((moving[block] & smooth[block]).any()):
                break
        moving &= smooth
        if self.sampled is None:
            return moving.reshape(self.in_shape)
        mask = torch.zeros(numel(self.in_shape), dtype=torch.bool, device=moving.device)
        mask[self.sampled] = moving
        return mask.reshape(self.in_shape)

    def jacobian(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(J, error) as (out_numel, in_numel) matrices (NaN columns where not sampled)."""
        if self.mode == "dense":
            return self.partial, self.error
        if self.sampled is not None:
            n_out, n_in = self.partial.shape[0], numel(self.in_shape)
            jac = torch.full((n_out, n_in), float("nan"), dtype=self.partial.dtype,
                             device=self.partial.device)
            err = torch.zeros_like(jac)
            jac[:, self.sampled], err[:, self.sampled] = self.partial, self.error
            return jac, err
        n_out, n_in = numel(self.out_shape), numel(self.in_shape)
        index = torch.arange(n_in, device=self.partial.device).reshape(self.in_shape)
        cols = index.expand(self.out_shape).reshape(-1)
        rows = torch.arange(n_out, device=self.partial.device)
        jac = torch.zeros(n_out, n_in, dtype=self.partial.dtype, device=self.partial.device)
        err = torch.zeros_like(jac)
        jac[rows, cols] = self.partial.reshape(-1)
        err[rows, cols] = self.error.reshape(-1)
        return jac, err


@dataclass
class Directional:
    """J·t for a forward-mode check: value, error and output elements near a kink."""

    value: torch.Tensor
    error: torch.Tensor
    kink: torch.Tensor
