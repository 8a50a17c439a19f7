"""Default inputs that exercise the function. gradscope's spread over ±6.37 reaches past the
saturation of the common nonlinearities, which is what a bug on the far side of a branch needs;
but some functions are flat at almost every such point — sparsemax, entmax and hard attention
are one-hot there, a surrogate's window is missed — and a gradient that is 0 everywhere
checks nothing of the backward's arithmetic (a sparsemax backward scaled by 2 agrees at a
one-hot row). Where the user's code moves at no more than a quarter of the chosen elements, a
narrower draw is added (±1.37 or ±0.37, whichever moves clearly more of them): the check runs
at it first, and at the default spread too — a narrowed draw never drops the region where a
bug lies (a clipped activation wrong on its outer path past ±6). The header says which draw a
report shows. Only inputs gradscope drew are narrowed; given values are the user's."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import torch

from gradscope.errors import Stopped
from gradscope.inputs.bind import Bound
from gradscope.inputs.text import SPREAD, SPREAD_HALF, InputValue, respread
from gradscope.rng import generator
from gradscope.targets import Target
from gradscope.tensors import all_finite, plain_value

NARROWER = (SPREAD_HALF, 0.37)  # tried in this order below the default spread
FLAT_SHARE = 0.75  # narrowed only where at least this share of the drawn elements is flat
MOST_ELEMENTS = 100_000  # the probe costs a forward and a backward per spread: small inputs
GAIN = 1.5  # a narrower spread is taken where it moves this many times as many outputs
ROUNDOFF = 100  # an output element moved where it changed by more than this many ulps


@dataclass(frozen=True)
class Moving:
    """How many output elements a small move of the drawn inputs changes, of how many."""

    moving: int
    total: int

    @property
    def flat(self) -> int:
        return self.total - self.moving


def exercised(target: Target, bound: Bound, seed: int) -> Bound | None:
    """A draw of `bound`'s drawn inputs narrowed where the target is flat at most of its
    outputs at the default spread (None: not narrowed; the check runs at `bound` alone)."""
    drawn = [n for n, v in bound.values.items() if v.chosen and v.brief.startswith("spread(")]
    if not drawn or not target.runs_user_code or bound.dtype not in (torch.float32,
                                                                      torch.float64):
        return None
    if sum(bound.cast[n].numel() for n in drawn) > MOST_ELEMENTS:
        return None
    wide = _moving(target, bound.cast, drawn, seed)
    if wide is None or wide.flat < FLAT_SHARE * wide.total:
        return None
    best, chosen = wide, bound
    for spread in NARROWER:
        values = {n: respread(bound.values[n], spread) for n in drawn}
        candidate = _with(bound, values)
        found = _moving(target, candidate.cast, drawn, seed)
        # narrower only for clearly more movement: wide values reach more branches
        if found is not None and found.moving > max(GAIN * best.moving, 0):
            best, chosen = found, candidate
    if chosen is bound:
        return None
    why = (f"narrowed: a small move of the inputs changed {best.moving} of {best.total} output "
           f"element(s) here, {wide.moving} at ±{SPREAD:g}")
    return _with(bound, {n: chosen.values[n].noted(why) for n in drawn})


def _with(bound: Bound, values: Mapping[str, InputValue]) -> Bound:
    merged = {**bound.values, **values}
    cast = {**bound.cast, **{n: v.tensor.to(device=bound.device, dtype=bound.dtype)
                             for n, v in values.items()}}
    return replace(bound, values=merged, cast=cast)


def _moving(target: Target, cast: Mapping[str, torch.Tensor], drawn: list[str],
            seed: int) -> Moving | None:
    """How many output elements move when every drawn element is nudged along one seeded
    random direction (ordinary calls at the point and either side: the forward decides, never
    the backward being checked); None where the target does not run or has no finite floating
    output there (the check itself will say)."""
    dtype = cast[drawn[0]].dtype
    h = torch.finfo(dtype).eps ** (1 / 3)
    direction = {n: torch.randn(cast[n].shape, generator=generator(seed, f":exercise:{n}"),
                                dtype=torch.float64).to(cast[n]) for n in drawn}
    try:
        # the point itself first: code that remembers its first call sees the chosen point
        ends = [plain_value(target.forward, {**cast, **{n: cast[n] + s * h * direction[n]
                                                         for n in drawn}}) for s in (0, 1, -1)]
    except Stopped:
        raise
    except Exception:  # (the check's own calls report the target's errors)
        return None
    up, down = ends[1:]
    if not isinstance(up, torch.Tensor) or not up.is_floating_point() \
            or up.shape != down.shape or not (all_finite(up) and all_finite(down)):
        return None
    up, down = up.to(torch.float64), down.to(torch.float64)
    noise = ROUNDOFF * torch.finfo(dtype).eps * torch.maximum(up.abs(), down.abs()).clamp(min=1)
    return Moving(int(((up - down).abs() > noise).sum()), up.numel())
