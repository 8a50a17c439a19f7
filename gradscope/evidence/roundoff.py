"""The round-off of autograd's own answer in a low precision, measured, not assumed.

In float16 a backward that subtracts terms of size 2 to get 0 (the gradient of
`sum(F.layer_norm(x, ...)**2)`, which is flat) rounds to ±0.004, past float16's atol of 0.002,
and the flat forward would then read as a surrogate gradient. A fixed tolerance cannot know the
size of the terms a backward cancels; its round-off shows instead when the same VJP is taken at
inputs moved by their last bits (seeded signs): g(x±δ) − g(x) is rounding plus a slope of
order δ·|∂g/∂x| (δ is 2 units of the precision, far below its rtol), and the larger side is
kept, and at least the input's mean of it (one element's realisation of the rounding can fall
far below its spread). A surrogate, a
wrong factor or a missing term is the same at every nearby point: it moves with the slope only,
so measured round-off never excuses it.

Under --autocast the rounding that matters most is a bias the moved inputs cannot show: a
tanh saturated in float16 rounds to the same value at every nearby point, and the 1 − t² of its
backward is then off by an ulp of t, which the chain rule multiplies by the weights around it.
There the measure is also what autocast's precision changed: autograd's answer against the
same target's autograd without autocast (in the inputs' float32), capped at CAP_UNITS units of
the autocast dtype times the tensor's largest gradient. A wrong backward is wrong in both runs
(their difference stays rounding); a backward wrong only under autocast is excused by at most
that cap, far below a wrong factor or a missing term.

Only where the run computes below float64; the measure is added to every reference's error bound
for that view (its slack is 3 × the bound)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import torch

from gradscope.engines.autograd import AutogradEngine
from gradscope.engines.base import Answer
from gradscope.tensors import moved_by, ulp_signs

Noise = dict[str, torch.Tensor]  # input → the round-off of autograd's answer for it
# autocast's measured change is believed up to this many units of its dtype × the tensor's
# largest gradient (float16: 1.6 %, bfloat16: 12.5 % of it)
CAP_UNITS = 16


@dataclass(frozen=True)
class RoundOff:
    """Autograd at the inputs moved by ± their last bits (two engines, each with its graph)."""

    centre: AutogradEngine
    sides: tuple[AutogradEngine, AutogradEngine]
    plain: AutogradEngine | None = None  # --autocast: the same inputs without autocast
    units: float = 0.0  # --autocast: CAP_UNITS × its dtype's epsilon

    def vjp(self, upstream: torch.Tensor) -> dict[str, torch.Tensor]:
        """Per input, the round-off of autograd's VJP for `upstream` (input-shaped)."""
        v = upstream.to(self.centre.output.dtype)
        return self._noise(lambda engine: engine.vjp(v))

    def jacobian(self) -> dict[str, torch.Tensor]:
        """Per input, the round-off of autograd's Jacobian ((out_numel, in_numel))."""
        return self._noise(lambda engine: engine.jacobian())

    def _noise(self, answer: Callable[[AutogradEngine], Mapping[str, torch.Tensor]]) -> Noise:
        """`answer` of each engine: the centre's against the moved sides', and with
        --autocast against the twin's."""
        centre = answer(self.centre)
        noise = _measured(centre, [answer(s) for s in self.sides])
        return noise if self.plain is None else \
            _with_autocast(noise, centre, answer(self.plain), self.units)


def measure(engine: AutogradEngine, computed: torch.dtype,
            plain: Callable[[Mapping[str, torch.Tensor]], torch.Tensor] | None = None
            ) -> RoundOff | None:
    """Engines at the inputs moved by ±2 units of `computed`'s precision (None in float64,
    where the round-off is far below every tolerance, or where the target refuses the moved
    inputs: then nothing is widened); with --autocast, `plain` is the target's forward
    without it, whose autograd is measured against too."""
    if computed == torch.float64:
        return None
    eps = float(torch.finfo(computed).eps)
    values = {n: leaf.detach() for n, leaf in engine.leaves.items()}
    signs = ulp_signs(values)
    sides = []
    for sign in (1.0, -1.0):
        try:
            sides.append(AutogradEngine(engine.forward, moved_by(values, signs, sign * 2 * eps)))
        except Exception:  # the target refuses the moved inputs: no widening
            return None
    twin = None
    if plain is not None:
        try:
            twin = AutogradEngine(plain, values)
        except Exception:  # (no twin: the moved inputs' measure alone)
            twin = None
    return RoundOff(engine, (sides[0], sides[1]), twin, CAP_UNITS * eps)


def widened(answers: Mapping[str, Mapping[str, Answer]], noise: Callable[[], Noise]
            ) -> dict[str, dict[str, Answer]]:
    """The answers (engine → input → Answer) with autograd's measured round-off added to each
    error bound (unchanged where `noise` measures none)."""
    measured = guarded(noise)
    if not measured:
        return {e: dict(a) for e, a in answers.items()}
    out: dict[str, dict[str, Answer]] = {}
    for engine, per_input in answers.items():
        out[engine] = {}
        for name, answer in per_input.items():
            extra = measured.get(name)
            if extra is not None:
                extra = extra.to(answer.values.device, answer.values.dtype)
                answer = replace(answer, error=extra if answer.error is None
                                 else answer.error + extra)
            out[engine][name] = answer
    return out


def guarded(call: Callable[[], Noise]) -> Noise | None:
    """A measurement whose backward the target refuses (or that fails at the moved inputs)
    is no measurement: nothing is widened."""
    try:
        return call()
    except Exception:
        return None


def _with_autocast(noise: Noise, centre: Mapping[str, torch.Tensor],
                   plain: Mapping[str, torch.Tensor], units: float) -> Noise:
    """The measured noise, or where larger what autocast changed in autograd's answer, capped
    at `units` × the tensor's largest gradient without autocast."""
    out = {}
    for name, measured in noise.items():
        twin = plain[name].to(torch.float64)
        changed = (centre[name].to(torch.float64) - twin).abs_().nan_to_num_(0.0, 0.0, 0.0)
        top = float(twin.abs().nan_to_num(0.0, 0.0, 0.0).max()) if twin.numel() else 0.0
        out[name] = torch.fmax(measured, changed.clamp_(max=units * max(top, 1.0)))
    return out


def _measured(centre: Mapping[str, torch.Tensor], sides: list[Mapping[str, torch.Tensor]]
              ) -> dict[str, torch.Tensor]:
    out = {}
    for name, g in centre.items():
        g = g.to(torch.float64)
        up, down = (s[name].to(torch.float64) - g for s in sides)
        local = torch.fmax(up.abs(), down.abs()).nan_to_num_(0.0, 0.0, 0.0)
        # (at least the input's mean: one element's realisation may fall far below its spread)
        out[name] = local.clamp_(min=float(local.mean())) if local.numel() else local
    return out
