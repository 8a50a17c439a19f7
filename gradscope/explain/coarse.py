"""Whether a surrogate gradient is consistent with its forward at a coarse scale.

Where the forward is piecewise constant, the derivative is zero and a surrogate stands in for
it; no element-by-element comparison can judge a surrogate. What can: along a line through the
input, over a range much wider than the forward's steps, the surrogate must integrate to what
the forward does there. A straight-through round integrates to the rise of its staircase, a
hardtanh-gated sign to its jump of 2; a straight-through estimator scaled by 2, a gate three
times too wide, or a spike surrogate whose sign flips on one side do not.

This module reads such lines (`read`): per line, the forward's rise and variation, the
surrogate's integral and mass, whether it is constant where it is not zero (a straight-through
estimator) and where (its gate), and the verdict:

* AGAINST: the forward moves one way only (monotone along the line) and the surrogate points
  against it, or cancels itself out (a sign flipped on one side): always a failure;
* SCALED: a constant (straight-through) surrogate whose integral is not the forward's rise:
  its factor or its gate is off. One that is not zero anywhere on the line stands for the
  forward's average slope and must match it within BAND (a `2*g` through a staircase does
  not); one gated to a window around the forward's jumps is a box whose width is partly the
  method's choice, as a bump's slope is (the common rectangular spike surrogate, height 1 over
  |v| ≤ 1, integrates to twice its jump), and must match within GATED_BAND (a sign gated on
  |x| ≤ 3, three times its jump, does not). Pure identity everywhere on the line (the textbook
  straight-through estimator, gradient passed on unchanged) is never SCALED, whatever the
  forward saturates to;
* SMOOTH: the forward is not piecewise constant along the line — within a tiny shift (`NEAR`
  of the range) it moves by a sliver of its variation (a slope, not a jump) at `SMOOTH_SHARE`
  of the positions or more (two at least), as a saturated sparsemax or clamp does on the ramp
  between its flat stretches: a surrogate stands in for a step's zero derivative, never for a
  slope the forward has. A step moves within the shift only where a jump falls inside it. Pure
  identity (the textbook straight-through estimator, also through a clamp's saturation) is
  never SMOOTH, and a line another verdict already fails keeps that one;
* CONSISTENT, or UNKNOWN where the line cannot tell (the forward or the surrogate never moves
  on it, non-finite values).

A surrogate that is not constant (a bump: fast sigmoid, arctan) is judged by direction only,
since its scale is a free parameter of the method (snnTorch's fast sigmoid integrates to
2/slope); its ratio is reported.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

CONSISTENT, UNKNOWN, AGAINST, SCALED, SMOOTH = 0, 1, 2, 3, 4
INCONSISTENT = (AGAINST, SCALED, SMOOTH)  # the verdicts that never excuse
NEAR = 1e-7  # the tiny shift, relative to the line's range: a step's forward does not move
SMOOTH_SHARE = 0.02  # at this share of the positions (2 at least) it has a slope: no step
SLIVER = 0.01  # a move within the shift below this fraction of the variation: a slope
BAND = 1.5  # an ungated straight-through integral within [1/1.5, 1.5] of the rise
GATED_BAND = 2.05  # a gated one within [1/2, 2] (and a little: the rise of a sampled step)
CANCEL = 0.5  # |∫g| below this fraction of ∫|g| on a monotone forward: it cancels itself
FLAT = 1e-9  # relative: values of g below this fraction of its largest are zero (a gate)
CONSTANT = 1e-6  # relative: g's non-zero values within this of each other are one constant


@dataclass(frozen=True)
class Lines:
    """Samples along L lines: `forward` (K, L) is vᵀf along each, `slope` (K, L) autograd's
    derivative of it (the surrogate), at positions `t` (K,), evenly spaced. `unit` (L,): the
    slope a gradient passed on unchanged would have (the upstream's sum over the outputs the
    element moves), NaN where that is not defined. `near` (K, L): vᵀf a tiny shift (NEAR of
    the range) further along (None: not read)."""

    t: torch.Tensor
    forward: torch.Tensor
    slope: torch.Tensor
    unit: torch.Tensor
    near: torch.Tensor | None = None


@dataclass(frozen=True)
class Reading:
    """Per line (L,): the forward's rise and total variation over the range, the surrogate's
    integral and mass (∫|g|), its constant value where not zero (NaN: not constant), where it
    is not zero (`lo`, `hi`: grid positions, NaN when zero everywhere), whether it is zero
    somewhere (gated), and the verdict code."""

    rise: torch.Tensor
    variation: torch.Tensor
    integral: torch.Tensor
    mass: torch.Tensor
    constant: torch.Tensor
    lo: torch.Tensor
    hi: torch.Tensor
    gated: torch.Tensor
    verdict: torch.Tensor

    @property
    def ratio(self) -> torch.Tensor:
        """∫g over the forward's rise (inf where the forward does not rise)."""
        return self.integral / self.rise


def read(lines: Lines) -> Reading:
    """The reading of every line (module doc)."""
    t, f, g = lines.t.double(), lines.forward.double(), lines.slope.double()
    dt = (t[-1] - t[0]) / max(1, len(t) - 1)
    finite = torch.isfinite(f).all(0) & torch.isfinite(g).all(0)
    f, g = torch.nan_to_num(f), torch.nan_to_num(g)
    rise = f[-1] - f[0]
    steps = (f[1:] - f[:-1]).abs()
    variation = steps.sum(0)
    integral = torch.trapezoid(g, dx=float(dt), dim=0)
    mass = torch.trapezoid(g.abs(), dx=float(dt), dim=0)
    top = g.abs().amax(0)
    nonzero = g.abs() > FLAT * top
    constant = _constant(g, nonzero)
    lo, hi = _support(t, nonzero)
    gated = ~nonzero.all(0)
    scale = f.abs().amax(0)
    moves = variation > 1e-9 * (1 + scale)
    present = (top > 0) & (mass > 1e-12 * (1 + scale))
    monotone = variation <= 1.05 * rise.abs() + 1e-9 * (1 + scale)
    against = monotone & ((integral * rise <= 0) | (integral.abs() < CANCEL * mass))
    identity = ~gated & ((constant - lines.unit.double()).abs()
                         <= CONSTANT * lines.unit.double().abs())
    verdict = torch.full_like(rise, CONSISTENT, dtype=torch.int8)
    verdict[_scaled(integral, rise, constant, identity, gated)] = SCALED
    verdict[against] = AGAINST
    # (only where nothing else failed it, and never the textbook identity: a deliberate
    # straight-through through a clamp's saturation is that)
    verdict[(verdict == CONSISTENT) & ~identity & _smooth(lines, f, scale, variation)] = SMOOTH
    verdict[~(finite & moves & present)] = UNKNOWN
    return Reading(rise, variation, integral, mass, constant, lo, hi, gated, verdict)


def failing(verdict: torch.Tensor) -> torch.Tensor:
    """Where a line's verdict fails the surrogate (INCONSISTENT)."""
    return torch.isin(verdict, torch.tensor(INCONSISTENT, dtype=verdict.dtype))


def _smooth(lines: Lines, f: torch.Tensor, scale: torch.Tensor, variation: torch.Tensor
            ) -> torch.Tensor:
    """Lines whose forward has a slope: within the tiny shift it moves by a sliver of its
    variation at SMOOTH_SHARE of the positions, two at least (module doc)."""
    if lines.near is None:
        return torch.zeros(f.shape[1], dtype=torch.bool)
    near = lines.near.double()
    both = torch.isfinite(near) & torch.isfinite(lines.forward.double())
    delta = (torch.nan_to_num(near) - f).abs()
    sliver = both & (delta > 1e-10 * (1 + scale)) & (delta < SLIVER * variation)
    return sliver.sum(0) >= (SMOOTH_SHARE * both.sum(0)).clamp(min=2)


def _scaled(integral: torch.Tensor, rise: torch.Tensor, constant: torch.Tensor,
            identity: torch.Tensor, gated: torch.Tensor) -> torch.Tensor:
    """A straight-through estimator (not identity) whose integral is off the rise."""
    ratio = integral / rise
    band = torch.where(gated, GATED_BAND, BAND)
    off = (ratio > band) | (ratio < 1 / band) | ~torch.isfinite(ratio)
    return torch.isfinite(constant) & ~identity & off


def with_edges(reading: Reading, lo: torch.Tensor, hi: torch.Tensor) -> Reading:
    """The reading with each gated straight-through estimator's integral exact: its constant
    times the width between its edges as bisection placed them (the grid's trapezoid is off
    by up to a spacing at each edge); an edge not placed (the range bounds it) is the grid's.
    Lines that are no gated straight-through estimator keep theirs."""
    gated = reading.gated & torch.isfinite(reading.constant)
    lo = torch.where(torch.isfinite(lo), lo, reading.lo)
    hi = torch.where(torch.isfinite(hi), hi, reading.hi)
    exact = gated & torch.isfinite(lo) & torch.isfinite(hi)
    if not bool(exact.any()):
        return reading
    integral = torch.where(exact, reading.constant * (hi - lo), reading.integral)
    verdict = reading.verdict.clone()
    judged = exact & ((verdict == CONSISTENT) | (verdict == SCALED))  # (SMOOTH stays)
    scaled = _scaled(integral, reading.rise, reading.constant, torch.zeros_like(exact), exact)
    verdict[judged & scaled] = SCALED
    verdict[judged & ~scaled] = CONSISTENT
    return Reading(reading.rise, reading.variation, integral, reading.mass, reading.constant,
                   reading.lo, reading.hi, reading.gated, verdict)


def _constant(g: torch.Tensor, nonzero: torch.Tensor) -> torch.Tensor:
    """Each line's value where it is not zero, if that is one constant (else NaN)."""
    count = nonzero.sum(0)
    mean = torch.where(nonzero, g, 0).sum(0) / count.clamp(min=1)
    spread = torch.where(nonzero, (g - mean).abs(), 0).amax(0)
    same = (count > 0) & (spread <= CONSTANT * mean.abs())
    return torch.where(same, mean, torch.full_like(mean, float("nan")))


def _support(t: torch.Tensor, nonzero: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The first and last grid positions where each line's surrogate is not zero."""
    k = torch.arange(len(t)).unsqueeze(1).expand_as(nonzero)
    first = torch.where(nonzero, k, len(t)).amin(0)
    last = torch.where(nonzero, k, -1).amax(0)
    none = last < 0
    nan = torch.full(first.shape, float("nan"), dtype=torch.float64)
    lo = torch.where(none, nan, t.double()[first.clamp(max=len(t) - 1)])
    hi = torch.where(none, nan, t.double()[last.clamp(min=0)])
    return lo, hi
