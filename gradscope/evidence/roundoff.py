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

Where a run mode changed autograd's evaluation (the target's twin: its own forward beside the
mode's — under mixed precision, ops on a lower-precision list), the rounding that matters most is
a bias the moved inputs cannot show: a tanh saturated in float16 rounds to the same value at
every nearby point, and the 1 − t² of its backward is then off by an ulp of t, which the chain
rule multiplies by the weights around it. There the measure is also what the mode changed:
autograd's answer against the twin's autograd (in the inputs' dtype), element by element,
capped at CAP_UNITS units of the mode's lowest precision times the tensor's largest gradient.
A wrong backward is wrong in both runs (their difference stays rounding); a backward wrong only
in the mode is excused by at most that cap, far below a wrong factor or a missing term. An
element the mode changed by more than the cap was computed where the lower precision dominates
(a saturated tanh's 1 − t² in bfloat16 is off by half its value): there the element is judged
at that precision's own tolerance, and only there — a float32 backward behind one bfloat16
matmul keeps float32's tolerance wherever its answer is only that matmul's rounding away from
the twin's.

Only where the run computes below float64; the measure is added to every reference's error bound
for that view (its slack is 3 × the bound)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from gradscope.compare.tolerance import FD_ERROR_FACTOR, Tolerance
from gradscope.engines.autograd import AutogradEngine
from gradscope.engines.base import Answer
from gradscope.evidence.custom_backward import CallsApart
from gradscope.memory import released
from gradscope.targets.base import Twin
from gradscope.tensors import broadcast, gap, moved_by

Noise = dict[str, torch.Tensor]  # input → the round-off of autograd's answer for it
# input → the flat indices of the elements compared (None: all of them; an input not named:
# none — a sample's, or one no answer covers)
Where = dict[str, torch.Tensor | None]
# a mode's measured change is believed up to this many units of its lowest precision × the
# tensor's largest gradient (float16: 1.6 %, bfloat16: 12.5 % of it)
CAP_UNITS = 16


# a side's answer further than this share of the largest gradient from the centre's is asked
# again: a move of two units shifts a gradient by far less, except across a kink
IMPLAUSIBLE = 1e-2

# inputs past this many elements together (a model's parameters): each moved side is made when
# a view asks and let go after, its noise folded in tensor by tensor — kept, the two sides are
# two more copies of the model and two graphs, and their answers three more
STREAMED_FROM = 1 << 22


@dataclass
class RoundOff:
    """Autograd at the inputs moved by ± their last bits (`relative`: 2 units of the computed
    precision), beside the centre's; the sides' engines are kept for small inputs and made
    anew, one at a time, for large ones."""

    centre: AutogradEngine
    relative: float
    twin: AutogradEngine | None = None  # the twin's autograd at the same inputs, if any
    units: float = 0.0  # with a twin: CAP_UNITS × its lowest precision's epsilon
    low: Tolerance | None = None  # with a twin: its lowest precision's tolerance
    kept: list[AutogradEngine] = field(default_factory=list)
    # pairs of one side's backward asked twice whose answers differ (see `_side`)
    apart: list[CallsApart] = field(default_factory=list)

    def vjp(self, upstream: torch.Tensor, where: Where | None = None,
            centre: Mapping[str, torch.Tensor] | None = None) -> dict[str, torch.Tensor]:
        """Per input, the round-off of autograd's VJP for `upstream` (input-shaped; for the
        inputs in `where`, at those flat indices only); `centre`: autograd's own answer for it,
        asked already (not asked again). Each engine takes the upstream in its own output's
        dtype: the twin's in its own precision, so that what the mode changed includes the
        upstream's rounding into a lower-precision output."""
        if self.twin is not None:  # (measured whole, against the twin's)
            where = None
        # (only the inputs with an element compared: at a model's size each VJP of every
        # parameter is a copy of the model)
        only = None if where is None else [n for n, at in where.items()
                                           if at is None or at.numel()]
        return self._noise(lambda engine: engine.vjp(upstream.to(engine.output.dtype), only),
                           where, centre)

    def jacobian(self, centre: Mapping[str, torch.Tensor] | None = None
                 ) -> dict[str, torch.Tensor]:
        """Per input, the round-off of autograd's Jacobian ((out_numel, in_numel))."""
        return self._noise(lambda engine: engine.jacobian(), None, centre)

    def _noise(self, answer: Callable[[AutogradEngine], Mapping[str, torch.Tensor]],
               where: Where | None = None, known: Mapping[str, torch.Tensor] | None = None
               ) -> Noise:
        """`answer` of each engine: the centre's (`known`, where it was asked already)
        against the moved sides', and with a twin against the twin's."""
        def picked(got: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
            if where is None:
                return dict(got)
            return {n: g if where.get(n) is None else g.reshape(-1)[where[n].to(g.device)]
                    for n, g in got.items()}

        centre = picked(answer(self.centre) if known is None else known)
        noise: Noise = {}
        for sign, side in self._sides():
            _fold(noise, centre, self._side(sign, side, answer, picked, centre))
            del side  # (before the next side is made: each holds a moved copy of the inputs)
        noise = {n: t.clamp_(min=float(t.mean())) if t.numel() else t for n, t in noise.items()}
        return noise if self.twin is None else \
            _with_twin(noise, centre, answer(self.twin), self.units, self.low)

    def _side(self, sign: float, side: AutogradEngine,
              answer: Callable[[AutogradEngine], Mapping[str, torch.Tensor]],
              picked: Callable[[Mapping[str, torch.Tensor]], dict[str, torch.Tensor]],
              centre: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """A side's answer. Its backward counts like any other: an answer that a move of two
        units cannot explain — past IMPLAUSIBLE of the largest gradient away from the centre's,
        or NaN where it is finite — is asked once more; answers that differ are a pair for the
        determinism check (a backward that depends on the call), and the one nearer the
        centre's is measured (a wrong call never widens a bound)."""
        got = picked(answer(side))
        self.apart += [found for first, again, before, after in side.apart
                       for found in [CallsApart.of(first, again, before, after)] if found]
        side.apart.clear()
        if not _implausible(got, centre):
            return got
        again = picked(answer(side))
        found = CallsApart.of(f"the round-off measure's backward at the inputs moved by "
                              f"{'+' if sign > 0 else '−'}2 units", "the same asked again",
                              got, again)
        if found is None:  # the side holds: the centre's answer may be the wrong call
            return self._centre_again(answer, picked, centre, got)
        self.apart.append(found)
        return {n: torch.where((again[n] - centre[n]).abs() < (g - centre[n]).abs(), again[n], g)
                for n, g in got.items()}

    def _centre_again(self, answer: Callable[[AutogradEngine], Mapping[str, torch.Tensor]],
                      picked: Callable[[Mapping[str, torch.Tensor]], dict[str, torch.Tensor]],
                      centre: Mapping[str, torch.Tensor], side: dict[str, torch.Tensor]
                      ) -> dict[str, torch.Tensor]:
        """A side that holds its answer, implausibly far from the centre's: the centre's
        question asked once more. Where the centre answers the same, the gap is the
        precision's (a cancellation in bfloat16) and is measured; where it answers otherwise,
        the view's own call went wrong (a stale cache): the pair goes to the determinism
        check, and that gap is never measured as round-off — the side counts only where it is
        near."""
        again = picked(answer(self.centre))
        found = CallsApart.of("the backward this view asked", "the same asked again by the "
                              "round-off measure", centre, again)
        if found is None:
            return side
        self.apart.append(found)
        out = {}
        for name, g in side.items():
            c = centre.get(name)
            if c is None or c.shape != g.shape:
                out[name] = g
                continue
            _, scale = gap(g, c)
            far = (g.to(torch.float64) - c.to(torch.float64)).abs() > IMPLAUSIBLE * scale
            out[name] = torch.where(far.to(g.device), c.to(g.dtype), g)
        return out

    def _sides(self) -> Iterator[tuple[float, AutogradEngine]]:
        if self.kept:
            yield from zip((1.0, -1.0), self.kept, strict=False)
            return
        values = {n: leaf.detach() for n, leaf in self.centre.leaves.items()}
        keep = sum(v.numel() for v in values.values()) < STREAMED_FROM
        for sign in (1.0, -1.0):
            # (the moved values are the side's own: its leaves need no copy of them)
            side = AutogradEngine(self.centre.forward, moved_by(values, sign * self.relative),
                                  reinstate=self.centre.reinstate,
                                  copy=False)
            if keep:
                self.kept.append(side)
            yield sign, side
            del side


def _implausible(got: Mapping[str, torch.Tensor], centre: Mapping[str, torch.Tensor]) -> bool:
    """A side's answer no move of two units explains: NaN or infinite where the centre's is
    finite, or apart from it by more than IMPLAUSIBLE × its largest magnitude."""
    for name, g in got.items():
        c = centre.get(name)
        if c is None or c.shape != g.shape or not g.numel():
            continue
        if bool((~torch.isfinite(g) & torch.isfinite(c)).any()):
            return True
        top, scale = gap(g, c)
        if top > IMPLAUSIBLE * scale:
            return True
    return False


def measure(engine: AutogradEngine, computed: torch.dtype, twin: Twin | None = None
            ) -> RoundOff | None:
    """The measure at the inputs moved by ±2 units of `computed`'s precision (None in
    float64, where the round-off is far below every tolerance; a target that refuses the
    moved inputs gets no widening: `guarded`); with a `twin` (a run mode changed autograd's
    evaluation), against the twin's autograd too, capped in units of the mode's lowest
    precision."""
    if computed == torch.float64:
        return None
    eps = float(torch.finfo(computed).eps)
    other = None
    if twin is not None:
        try:
            other = AutogradEngine(twin.forward,
                                   {n: leaf.detach() for n, leaf in engine.leaves.items()},
                                   reinstate=engine.reinstate)
        except Exception:  # (no twin: the moved inputs' measure alone)
            other = None
    lowest = twin.precision() if twin is not None else None
    unit = float(torch.finfo(lowest).eps) if lowest is not None else eps
    low = Tolerance.for_dtype(str(lowest).removeprefix("torch.")) if lowest is not None \
        else None
    return RoundOff(engine, 2 * eps, other, CAP_UNITS * unit, low=low)


def widened(answers: Mapping[str, Mapping[str, Answer]], noise: Callable[[Where], Noise],
            elementwise: bool = True) -> dict[str, dict[str, Answer]]:
    """The answers (engine → input → Answer) with autograd's measured round-off added to each
    error bound (unchanged where `noise` measures none). Measured only at the elements some
    answer compares — a sample's (a model at scale: a few of millions), none where the
    sample holds none — never as a float64 tensor the size of the model. `elementwise`
    False: answers shaped otherwise than their inputs (a Jacobian), measured whole."""
    where = _compared(answers)
    if where is None:
        return {e: dict(a) for e, a in answers.items()}
    if not elementwise:
        where = dict.fromkeys(where)
    measured = guarded(lambda: noise(where))
    released()  # (the sides' copies, graphs and answers: gone before the comparison's peak)
    if not measured:
        return {e: dict(a) for e, a in answers.items()}
    out: dict[str, dict[str, Answer]] = {}
    for engine, per_input in answers.items():
        out[engine] = {}
        for name, answer in per_input.items():
            extra = measured.get(name)
            if extra is not None:
                answer = replace(answer, error=_added(answer, extra, where.get(name)))
            out[engine][name] = answer
    return out


def _added(answer: Answer, extra: torch.Tensor, at: torch.Tensor | None) -> torch.Tensor:
    """The answer's error bound plus the noise (measured at the flat indices `at` only)."""
    values = answer.values
    extra = extra.to(values.device, values.dtype)
    if at is None or extra.numel() != at.numel():  # (measured whole)
        return extra if answer.error is None else answer.error + extra
    error = torch.zeros(values.shape, dtype=values.dtype, device=values.device) \
        if answer.error is None else answer.error.clone()
    error.reshape(-1)[at.to(values.device)] += extra
    return error


def _compared(answers: Mapping[str, Mapping[str, Answer]]) -> Where | None:
    """Per input, the flat indices of the elements some answer compares, where they are not
    all of them (None: no answer compares any element)."""
    where: Where = {}
    anything = False
    names = {n for per_input in answers.values() for n in per_input}
    for name in names:
        masks = [a.checked for per_input in answers.values()
                 for a in [per_input.get(name)] if a is not None]
        if any(m is None for m in masks):
            where[name], anything = None, True
            continue
        union = None
        for m in masks:
            if broadcast(m) and not bool(m.reshape(-1)[0]):
                continue  # (one broadcast False: a sample of no element)
            union = m.clone() if union is None else union | m
        if union is None or not bool(union.any()):
            continue
        anything = True
        where[name] = None if bool(union.all()) else union.reshape(-1).nonzero().flatten()
    return where if anything else None


def remembered(measured: dict[str, Any], label: str, noise: Callable[[Any], Any]
                ) -> Callable[[Any], Any]:
    """`noise`, measured once per view and per set of compared elements (a refinement
    changes estimates, not which elements they answer)."""
    def ask(where: Any) -> Any:
        kept = measured.get(label)
        if kept is not None and _same_where(kept[0], where):
            return kept[1]
        found = noise(where)
        measured[label] = (where, found)
        return found

    return ask


def _same_where(a: Any, b: Any) -> bool:
    if a is None or b is None or set(a) != set(b):
        return a is None and b is None
    return all((x is None and y is None) or (x is not None and y is not None
                                             and torch.equal(x, y))
               for x, y in ((a[n], b[n]) for n in a))


def guarded(call: Callable[[], Noise]) -> Noise | None:
    """A measurement whose backward the target refuses (or that fails at the moved inputs)
    is no measurement: nothing is widened."""
    try:
        return call()
    except Exception:
        return None


def _with_twin(noise: Noise, centre: Mapping[str, torch.Tensor],
               plain: Mapping[str, torch.Tensor], units: float, low: Tolerance | None
               ) -> Noise:
    """The measured noise, or where larger what the run mode changed in autograd's answer,
    capped at `units` × the tensor's largest gradient in the twin's; where the change is past
    the cap, the cap plus the lower precision's own tolerance there (a third of it: the
    comparison allows FD_ERROR_FACTOR bounds)."""
    out = {}
    for name, measured in noise.items():
        twin = plain[name].to(torch.float64)
        changed = (centre[name].to(torch.float64) - twin).abs_().nan_to_num_(0.0, 0.0, 0.0)
        top = float(twin.abs().nan_to_num(0.0, 0.0, 0.0).max()) if twin.numel() else 0.0
        cap = units * max(top, 1.0)
        believed = changed.clamp(max=cap)
        if low is not None:
            past = changed > cap
            if bool(past.any()):
                atol = low.atol * max(1.0, top) if low.scaled else low.atol
                own = twin.abs().mul_(low.rtol).add_(atol).div_(FD_ERROR_FACTOR)
                believed = torch.where(past, believed + own, believed)
        out[name] = torch.fmax(measured, believed)
    return out


def _fold(noise: Noise, centre: Mapping[str, torch.Tensor], side: Mapping[str, torch.Tensor]
          ) -> None:
    """The larger of each element's noise so far and |side − centre| (in float64), one
    tensor at a time."""
    for name, g in centre.items():
        local = (side[name].to(torch.float64) - g.to(torch.float64)).abs_().nan_to_num_(
            0.0, 0.0, 0.0)
        was = noise.get(name)
        noise[name] = local if was is None else torch.fmax(was, local, out=was)
