"""What a torch function computes beyond reading its inputs and writing its output, for the
finite-difference budget (engines/fd/budget.py): the work of one evaluation is counted, never
timed, as the elements each torch function reads and writes, times the factor here. Sorting
costs log n per element; the dense factorisations and solves n per element (n³ for an n × n
matrix) — work FlopCounterMode does not count (it counts matmuls and convolutions)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch


def _first(args: Sequence[Any]) -> torch.Tensor | None:
    for a in args:
        if isinstance(a, torch.Tensor):
            return a
        if isinstance(a, list | tuple) and a and isinstance(a[0], torch.Tensor):
            return a[0]
    return None


def _log(args: Sequence[Any], kwargs: Mapping[str, Any]) -> float:
    t = _first(args)
    return max(1.0, math.log2(max(2, t.numel()))) if t is not None else 1.0


def _cubic(args: Sequence[Any], kwargs: Mapping[str, Any]) -> float:
    t = _first(args)
    return float(max(1, t.shape[-1])) if t is not None and t.ndim >= 2 else 1.0


def _pairwise(args: Sequence[Any], kwargs: Mapping[str, Any]) -> float:
    """cdist/pdist: each pair reads a row."""
    t = _first(args)
    return float(max(1, t.shape[-1])) if t is not None and t.ndim >= 1 else 1.0


def _grouped(args: Sequence[Any], kwargs: Mapping[str, Any]) -> float:
    """A grouped convolution's kernels run a group at a time: each group costs a call's
    overhead (about a thousand elements' work) beyond its elements."""
    groups = kwargs.get("groups", args[6] if len(args) > 6 else 1)
    groups = groups if isinstance(groups, int) else 1
    t = _first(args)
    return 1.0 + 1000.0 * groups / max(1, t.numel()) if t is not None and groups > 1 else 1.0


_CONVOLUTIONS = ("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                 "conv_transpose3d")
_SORTING = ("sort", "argsort", "msort", "topk", "kthvalue", "median", "nanmedian", "quantile",
            "nanquantile", "unique", "unique_consecutive", "searchsorted", "mode")
_LINALG = ("eigh", "eigvalsh", "eig", "eigvals", "svd", "svdvals", "qr", "inv", "inv_ex",
           "solve", "solve_ex", "det", "slogdet", "cholesky", "cholesky_ex", "lstsq", "pinv",
           "matrix_exp", "lu", "lu_factor", "lu_factor_ex", "lu_solve", "ldl_factor",
           "solve_triangular", "matrix_rank", "cond", "matrix_norm", "householder_product",
           "tensorinv", "tensorsolve", "multi_dot")


def _factors() -> dict[Any, Callable[[Sequence[Any], Mapping[str, Any]], float]]:
    found: dict[Any, Callable[[Sequence[Any], Mapping[str, Any]], float]] = {}
    for names, cost, spaces in ((_SORTING, _log, (torch, torch.Tensor)),
                                (_LINALG, _cubic, (torch.linalg, torch, torch.Tensor)),
                                (("cdist", "pdist"), _pairwise,
                                 (torch, torch.nn.functional)),
                                (_CONVOLUTIONS, _grouped, (torch, torch.nn.functional))):
        for space in spaces:
            for name in names:
                fn = getattr(space, name, None)
                if fn is not None:
                    found[fn] = cost
    return found


FACTORS = _factors()


def factor(func: Any, args: Sequence[Any], kwargs: Mapping[str, Any] | None = None) -> float:
    """Work per element read or written by `func` on `args`, relative to elementwise work."""
    cost = FACTORS.get(func)
    return cost(args, kwargs or {}) if cost is not None else 1.0
