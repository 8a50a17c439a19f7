"""The finite-difference stencil: steps, central differences, Richardson extrapolation with an
error estimate, and the constants that decide when an estimate is refined or has not converged.
Shared by every way of batching perturbations (and by `gradscope sweep`)."""

from __future__ import annotations

from collections.abc import Callable

import torch

EPS64 = float(torch.finfo(torch.float64).eps)
Progress = Callable[[int], None]  # told how many elements or columns were just estimated
REFINE_FACTOR = 100.0
REFINE_ROUNDS = 2
# A column whose extrapolation error stays above this fraction of its size has not converged
# (in a precision coarser than float32, more: see `unconverged_limit`).
UNCONVERGED = 1e-2
# An estimate still unconverged whose error bound is at most this many times the round-off it
# carries at its step (`noise_dominated`) is dominated by round-off, not by a kink or jump: its
# step is too small for the precision f computes in (a float32 target under --eps 1e-6), and
# smaller steps only make it worse. Such elements are retried with larger steps (WIDEN_FACTOR
# per round, WIDEN_ROUNDS rounds, at most policy.MAX_EPS of the element); those that stay
# dominated are `unchecked`, never kinks.
NOISE_DOMINATED = 4.0
WIDEN_FACTOR = 10.0
WIDEN_ROUNDS = 5
# Refine a converged-looking element too when its error estimate is above this (relative).
REFINE_ERROR = 1e-7
# Elementwise inputs this large start with two points (two forward calls, not four); smaller
# ones are cheap enough to show the extrapolated estimate for every element from the start.
TWO_POINT_FROM = 1 << 16
# Code gradscope cannot read (Python targets) is probed for elementwise structure once its dense
# Jacobian would hold more entries than this: the probe (2·log2(n) calls) costs less than the
# columns (2n calls), and an elementwise estimate bounds each element's error by its own output
# alone, where a column's VJP sums the round-off of every output (in float32 that can hide a
# wrong gradient of 1e-3); tiny Jacobians are differenced column by column.
PROBE_FROM = 64
BATCH_ELEMENTS = 1 << 19  # elements held by one vmapped chunk (per tensor): 4 MB in float64,
# small enough to stay in cache (measured: 2^19 beats 2^16 and 2^23 at 1e4 dense elements)


def numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def col_max(m: torch.Tensor, absolute: bool = False) -> torch.Tensor:
    """Largest entry (`absolute`: |entry|) of each column of an (n_out, k) matrix (NaN-aware,
    0 for no rows), a block of columns at a time: a sampled Jacobian can hold a gigabyte,
    and a whole copy of it (two, with abs) would double the check's memory."""
    out = torch.zeros(m.shape[1], dtype=m.dtype, device=m.device)
    if m.shape[0] == 0:
        return out
    step = max(1, BATCH_ELEMENTS // m.shape[0])
    for start in range(0, m.shape[1], step):
        block = m[:, start:start + step]
        block = block.abs() if absolute else block.clone()
        out[start:start + step] = torch.nan_to_num_(block, nan=float("inf"),
                                                    posinf=float("inf")).amax(0)
    return out


STENCIL = (1.0, -1.0, 0.5, -0.5)  # steps in units of h: two-point uses the first two


def estimate(outs: list[torch.Tensor] | torch.Tensor, h: torch.Tensor,
             eps: float = EPS64, noise: torch.Tensor | float = 0.0
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """(derivative, error bound) from f at the STENCIL points: Richardson-extrapolated with
    four points; a central difference with two, whose bound is round-off only (its truncation
    error is unknown until a comparison doubts it and `refine` extrapolates). `noise`: f's
    measured round-off where it exceeds eps·|f| (Point.noise)."""
    if len(outs) == 4:
        return richardson(outs[0], outs[1], outs[2], outs[3], h, eps, noise)
    fp, fm = outs[0], outs[1]
    # in place where possible, and 0 + value·a/h in one pass (addcdiv, a 0-dim zero
    # broadcast): at a million elements each pass costs about a millisecond
    zero = torch.zeros((), dtype=fp.dtype, device=fp.device)
    est = torch.sub(fp, fm)
    torch.addcdiv(zero, est, h, value=0.5, out=est)
    err = fp.abs().add_(fm.abs())  # (3·eps·(|f+| + |f−|) + 3·noise, over h)
    if not (isinstance(noise, float) and noise == 0.0):
        err.add_(noise, alpha=1 / eps)
    return est, torch.addcdiv(zero, err, h, value=3 * eps, out=err)


def richardson(fp: torch.Tensor, fm: torch.Tensor, fp2: torch.Tensor, fm2: torch.Tensor,
               h: torch.Tensor, eps: float = EPS64, noise: torch.Tensor | float = 0.0
               ) -> tuple[torch.Tensor, torch.Tensor]:
    # (in place where it can be: a column of a large output is tens of megabytes, and each
    # temporary of the plain formula would be one more)
    d1 = torch.sub(fp, fm).div_(2 * h)
    d2 = torch.sub(fp2, fm2).div_(h)
    est = torch.mul(d2, 4).sub_(d1).div_(3)
    del d1
    # round-off: each of the four values carries ~eps·|f|; |fp| + |fm| bounds |f| nearby
    # (and f's measured noise, where terms that cancel round far above that)
    err = torch.abs(fp).add_(fm.abs()).mul_(eps).add_(noise).mul_(3).div_(h)
    err.add_(d2.sub_(est).abs_())
    return est, err


def richardson_reusing(d1: torch.Tensor, error1: torch.Tensor, fp2: torch.Tensor,
                      fm2: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`richardson` from a two-point estimate made before at the same step (d1, its bound
    `error1`) and the points at ±h/2: refining costs two evaluations, not four. The same
    numbers: a two-point bound is exactly the four-point one's round-off term."""
    d2 = (fp2 - fm2) / h
    est = (4 * d2 - d1) / 3
    return est, (est - d2).abs() + error1


def unconverged_limit(eps: float) -> float:
    """The fraction of an estimate's size its error bound may reach and still count as
    converged, for a target rounding at machine epsilon `eps`: UNCONVERGED, or where f rounds
    as coarsely as float16 or bfloat16, what the best step achieves there (a relative error
    near eps^(2/3), which the bound overstates several times): 10·eps^(2/3)."""
    return max(UNCONVERGED, 10 * eps ** (2 / 3))


def noise_dominated(err: torch.Tensor, scale: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """Where an error bound is round-off, not truncation or a jump (NOISE_DOMINATED): the
    round-off a four-point estimate at step h carries is `Point.roundoff_scale` / h."""
    return err <= NOISE_DOMINATED * scale / h


def kinked(f0: torch.Tensor | list[torch.Tensor], outs: list[torch.Tensor] | torch.Tensor,
           h: torch.Tensor, eps: float = EPS64) -> torch.Tensor:
    """Where the four stencil points straddle a kink the target could not report (user code
    has no branch ids), read from f itself. The second differences
    c(s) = (f(x+s) − 2f(x) + f(x−s))/s at s = h and h/2 shrink with s where f is smooth
    (c(h/2) ≈ c(h)/2 ≈ f''·h/2); a slope jump Δ within h/4 of x gives c(h) ≥ c(h/2) ≈ Δ. A
    central difference straddling a kink is the average of the two slopes at every step, so
    convergence alone never sees it (a jump in f itself it does: its central differences grow
    as 1/h). What is not a kink: noise (round-off, also of large intermediate terms that
    cancel, which moves the central differences at h and h/2 apart as much as the second
    differences, while a kink a·h from x moves them apart by Δ·a/2 only), second differences
    of opposite signs or out of ratio, and a slope change below √eps of the slope (no
    tolerance sees it). `f0` may be one f(x) or four, each evaluated the way its stencil point
    was (a batch)."""
    fp, fm, fp2, fm2 = outs[0], outs[1], outs[2], outs[3]
    b = f0 if isinstance(f0, list) else [f0] * 4
    noise = 8 * eps * (fp.abs() + fm.abs() + b[0].abs() + b[1].abs()) / h
    return _kink_shaped((fp - b[0]) + (fm - b[1]), (fp2 - b[2]) + (fm2 - b[3]),
                        (fp - fm) / (2 * h), h, noise, fp2, fm2, eps)


def second_difference(fp: torch.Tensor, fm: torch.Tensor, f0: torch.Tensor) -> torch.Tensor:
    """f(x+h) − 2f(x) + f(x−h), kept by a two-point pass for `kinked_reusing`."""
    return (fp - f0) + (fm - f0)


def kinked_reusing(second: torch.Tensor, error1: torch.Tensor, d1: torch.Tensor,
                   f0: torch.Tensor, fp2: torch.Tensor, fm2: torch.Tensor, h: torch.Tensor,
                   eps: float = EPS64) -> torch.Tensor:
    """`kinked` where the points at ±h were evaluated before: their second difference, the
    two-point estimate d1 and its bound (which is 3·(eps·(|f(x+h)| + |f(x−h)|) + f's noise)/h,
    so it stands in for the round-off of the outer points)."""
    noise = 8 * (error1 / 3 + 2 * eps * f0.abs() / h)
    return _kink_shaped(second, (fp2 - f0) + (fm2 - f0), d1, h, noise, fp2, fm2, eps)


def _kink_shaped(second1: torch.Tensor, second2: torch.Tensor, d1: torch.Tensor,
                 h: torch.Tensor, noise: torch.Tensor, fp2: torch.Tensor, fm2: torch.Tensor,
                 eps: float) -> torch.Tensor:
    """The test of `kinked` on the second differences at h and h/2 (numerators)."""
    c1, c2 = second1 / h, second2 / (h / 2)
    d2 = (fp2 - fm2) / h  # central differences at h (d1), h/2
    above = c2.abs() > torch.maximum(10 * noise + 3 * (d2 - d1).abs(),
                                     eps ** 0.5 * torch.maximum(d1.abs(), d2.abs()))
    shaped = (c1 * c2 > 0) & (c1.abs() >= 0.9 * c2.abs())
    return above & shaped & ((c2 - c1 / 2).abs() > 0.25 * c2.abs())


def central(f: Callable[[float], torch.Tensor], x: float, h: float) -> float:
    """The two-point central difference (f(x+h) − f(x−h)) / 2h of a scalar function."""
    fp, fm = f(x + h), f(x - h)
    est, _ = estimate([fp, fm], torch.as_tensor(h, dtype=fp.dtype, device=fp.device))
    return float(est)
