"""What finite differences give for one input — an `Estimate`, immutable once made (refining
one makes a new one) — and for a direction (`Directional`), with the products the comparison
needs (Jᵀv, the Jacobian, which columns move).

Two kinds of estimate: `ElementwiseEstimate` (each output element depends on one element of
the input: one partial per output element) and `ColumnEstimate` (one Jacobian column per
element, or per sampled element)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from gradscope.engines.fd.stencil import BATCH_ELEMENTS, numel
from gradscope.tensors import any_to_shape, sum_to_shape, weighted


@dataclass(frozen=True)
class Estimate:
    """Finite-difference Jacobian information for one input: the estimate, its error bound,
    which elements' stencils straddled a kink/jump/pole (by branch too), and how many stencil
    points each element or column has (2, or 4 once refined; None: not refinable)."""

    name: str
    in_shape: tuple[int, ...]
    out_shape: tuple[int, ...]
    partial: torch.Tensor
    error: torch.Tensor  # same shape as partial
    kink: torch.Tensor  # bool, input-shaped
    kink_by_branch: dict[int, torch.Tensor] = field(default_factory=dict)  # branch → mask
    forward_calls: int = 0
    note: str = ""
    points: torch.Tensor | None = None
    # input-shaped: elements whose perturbed points the target rejected (raised at) at every
    # step tried; they have no estimate (None: none was rejected)
    rejected: torch.Tensor | None = None
    why: str = ""  # what the target raised there (its last line)
    # input-shaped: elements whose estimate stayed dominated by round-off at every step tried
    # (stencil.NOISE_DOMINATED): their values carry an error bound too wide to judge by, so
    # they are not compared (None: none)
    noisy: torch.Tensor | None = None
    widened: int = 0  # elements (columns) estimated at a step larger than the run's

    mode = "dense"

    @property
    def unestimated(self) -> torch.Tensor | None:
        """Input-shaped mask of the elements with no estimate to judge by: rejected or
        noise-dominated (None: none)."""
        if self.noisy is None:
            return self.rejected
        return self.noisy if self.rejected is None else self.rejected | self.noisy

    @property
    def kink_by_op(self) -> torch.Tensor:
        """Input-shaped: the kink elements an op of the op table explains (a branch id that
        changed; a negative key is a kink the differences found themselves)."""
        out = torch.zeros_like(self.kink)
        for key, mask in self.kink_by_branch.items():
            if key >= 0:
                out |= mask.to(out.device)
        return out

    @property
    def checked(self) -> torch.Tensor | None:
        """Input-shaped mask of the elements that have an estimate (None: all of them)."""
        missing = self.unestimated
        return None if missing is None else ~missing

    @property
    def sampled(self) -> torch.Tensor | None:
        """Flat indices of the sampled columns (None: every column was estimated)."""
        return None

    def vjp(self, v: torch.Tensor, ones: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """(Jᵀv, its error estimate), shaped like the input (NaN where not sampled). `ones`:
        v is all ones (the default upstream), which some estimates need no products for."""
        raise NotImplementedError

    def jacobian(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(J, error) as (out_numel, in_numel) matrices (NaN columns where not sampled)."""
        raise NotImplementedError

    def nonconstant(self, atol: float, first: bool = False) -> torch.Tensor:
        """Input-shaped mask of the elements away from a kink whose column has an entry
        beyond atol + 3·error: the elements the function changes with (`first`: stop at the
        first block of columns that has one)."""
        raise NotImplementedError

    def locally_constant(self, atol: float) -> bool:
        """True when every column away from a kink is zero within its error: the function does
        not change with this input at any point checked (piecewise constant)."""
        smooth = ~self.kink.reshape(-1)
        if self.sampled is not None:
            smooth = smooth[self.sampled]
        return bool(smooth.any()) and not bool(self.nonconstant(atol, first=True).any())


@dataclass(frozen=True)
class ElementwiseEstimate(Estimate):
    """partial: out-shaped ∂f_j/∂x_i(j), the one element of x that output element j moves
    with."""

    mode = "elementwise"

    def vjp(self, v: torch.Tensor, ones: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        if ones:
            return (sum_to_shape(self.partial, self.in_shape),
                    sum_to_shape(self.error, self.in_shape))
        v = v.to(self.partial.dtype)
        grad = sum_to_shape(weighted(v, self.partial), self.in_shape)
        out = v.ne(0).expand(self.partial.shape)
        if not bool(out.all()):  # an element only undefined outputs move: not compared
            undefined = any_to_shape(~out & ~torch.isfinite(self.partial), self.in_shape)
            grad = grad.masked_fill(undefined & ~any_to_shape(out, self.in_shape), float("nan"))
        return grad, sum_to_shape(weighted(v.abs(), self.error), self.in_shape)

    def jacobian(self) -> tuple[torch.Tensor, torch.Tensor]:
        n_out, n_in = numel(self.out_shape), numel(self.in_shape)
        index = torch.arange(n_in, device=self.partial.device).reshape(self.in_shape)
        cols = index.expand(self.out_shape).reshape(-1)
        rows = torch.arange(n_out, device=self.partial.device)
        jac = torch.zeros(n_out, n_in, dtype=self.partial.dtype, device=self.partial.device)
        err = torch.zeros_like(jac)
        jac[rows, cols] = self.partial.reshape(-1)
        err[rows, cols] = self.error.reshape(-1)
        return jac, err

    def nonconstant(self, atol: float, first: bool = False) -> torch.Tensor:
        beyond = self.partial.abs() > atol + 3 * self.error  # one entry per output element
        return any_to_shape(beyond, self.in_shape) & ~self.kink


@dataclass(frozen=True)
class ColumnEstimate(Estimate):
    """partial: the (out_numel, k) Jacobian columns of every element (k = in_numel) or, with
    `indices`, of the sampled elements only."""

    indices: torch.Tensor | None = None  # sampled: flat indices of the columns estimated
    # (n_in,): the group whose differences a column shares (grouped.py), −1: its own
    groups: torch.Tensor | None = None
    # (n_out, n_in): a two-point column's f(x+h) − 2f(x) + f(x−h), which its refinement
    # reuses with the points at ±h/2 (NaN: refined from four new points; None: none kept)
    second: torch.Tensor | None = None

    @property
    def mode(self) -> str:  # type: ignore[override]
        return "dense" if self.indices is None else "sampled"

    @property
    def sampled(self) -> torch.Tensor | None:
        return self.indices

    @property
    def empty(self) -> bool:
        """A sample of no element (a model at scale whose flop budget is spent): its answers
        are one broadcast value, not a model-sized tensor of NaN."""
        return self.indices is not None and self.indices.numel() == 0

    def _everywhere(self, value: float, shape: tuple[int, ...], dtype: torch.dtype
                    ) -> torch.Tensor:
        return torch.full((), value, dtype=dtype, device=self.partial.device).expand(shape)

    @property
    def checked(self) -> torch.Tensor | None:
        if self.indices is None:
            return super().checked
        missing = self.unestimated
        if self.empty and missing is None:
            return self._everywhere(False, tuple(self.in_shape), torch.bool)
        mask = torch.zeros(numel(self.in_shape), dtype=torch.bool, device=self.partial.device)
        mask[self.indices] = True
        mask = mask.reshape(self.in_shape)
        return mask if missing is None else mask & ~missing

    def vjp(self, v: torch.Tensor, ones: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        flat = v.to(self.partial.dtype).reshape(-1)
        partial, error = self.partial, self.error
        undefined = None
        if not bool(flat.ne(0).all()):  # the rows v leaves out (an output element the
            rows = flat.ne(0)  # function is undefined at) do not enter: 0·NaN is no product
            # a column that moves only outputs undefined here is not compared (NaN)
            undefined = (~torch.isfinite(partial[~rows])).any(0) & \
                ~(partial[rows].abs() > 3 * error[rows]).any(0)
            flat, partial, error = flat[rows], partial[rows], error[rows]
        product = flat @ partial
        if undefined is not None:
            product = product.masked_fill(undefined, float("nan"))
        # (bounds may be kept in float32: summed there, returned in the estimate's dtype)
        bound = (flat.abs().to(error.dtype) @ error).to(product.dtype)
        if self.indices is None:
            return product.reshape(self.in_shape), bound.reshape(self.in_shape)
        if self.empty:
            shape = tuple(self.in_shape)
            return (self._everywhere(float("nan"), shape, self.partial.dtype),
                    self._everywhere(0.0, shape, self.partial.dtype))
        n_in = numel(self.in_shape)
        grad = torch.full((n_in,), float("nan"), dtype=self.partial.dtype,
                          device=self.partial.device)
        err = torch.zeros_like(grad)
        grad[self.indices] = product
        err[self.indices] = bound
        return grad.reshape(self.in_shape), err.reshape(self.in_shape)

    def jacobian(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self.indices is None:
            return self.partial, self.error
        n_out, n_in = self.partial.shape[0], numel(self.in_shape)
        if self.empty:
            return (self._everywhere(float("nan"), (n_out, n_in), self.partial.dtype),
                    self._everywhere(0.0, (n_out, n_in), self.partial.dtype))
        jac = torch.full((n_out, n_in), float("nan"), dtype=self.partial.dtype,
                         device=self.partial.device)
        err = torch.zeros_like(jac)
        jac[:, self.indices], err[:, self.indices] = self.partial, self.error.to(err.dtype)
        return jac, err

    def nonconstant(self, atol: float, first: bool = False) -> torch.Tensor:
        jac, err = self.partial, self.error  # a dense Jacobian can hold 1e8 entries: blocks
        smooth = ~self.kink.reshape(-1)
        if self.indices is not None:
            smooth = smooth[self.indices]
        moving = torch.zeros(jac.shape[1], dtype=torch.bool, device=jac.device)
        step = max(1, BATCH_ELEMENTS // max(1, jac.shape[0]))
        for start in range(0, jac.shape[1], step):
            block = slice(start, start + step)
            moving[block] = (jac[:, block].abs() > atol + 3 * err[:, block]).any(0)
            if first and bool((moving[block] & smooth[block]).any()):
                break
        moving &= smooth
        if self.indices is None:
            return moving.reshape(self.in_shape)
        mask = torch.zeros(numel(self.in_shape), dtype=torch.bool, device=moving.device)
        mask[self.indices] = moving
        return mask.reshape(self.in_shape)


@dataclass(frozen=True)
class Directional:
    """J·t for a forward-mode check: value, error and output elements near a kink."""

    value: torch.Tensor
    error: torch.Tensor
    kink: torch.Tensor
