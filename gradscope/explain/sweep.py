"""Running a target along lines through one input, for the coarse-scale check of a surrogate
(explain/coarse.py): at each position the input's elements take, vᵀf and autograd's gradient
of it, with v the run's upstream.

Each line moves one element of the input over the same absolute range. An input whose output
elements each follow their own input element alone, at any distance (probed here with moves as
wide as the sweep's: a flat forward passes any small-step probe), moves all its elements at
once, one call per position for every line; any other input moves a few seeded elements, one
line each.
The range covers the input's values and as much again on either side, so that it holds the
forward's structure around them (a staircase's many steps, a gate and the jump inside it), and
the number of positions follows what one evaluation costs (counted, never timed). Values the
target refuses (it raises) leave a position undefined: such a line tells nothing."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch

from gradscope.explain.coarse import NEAR, Lines, Reading, read, with_edges
from gradscope.tensors import sum_to_shape

Forward = Callable[[Mapping[str, torch.Tensor]], torch.Tensor]

POINTS = 257  # positions per line where evaluations are cheap (spacing 0.1 over ±12.7)
ALONE_POINTS = 129  # …per line through one element alone (a whole evaluation per position)
MIN_POINTS = 65
# evaluations one sweep may make, whatever their size: each costs a forward and a backward of
# the user's code, whose fixed overhead (milliseconds for a small model) dominates small inputs
MAX_EVALUATIONS = 256
MAX_INPUTS = 4  # inputs swept in one run (those with the most surrogate elements first)
WORK = 5e7  # elements all evaluations of a sweep may touch together (about a second)
MAX_LINES = 4  # lines through an input that is not elementwise (each its own evaluations)
MAX_IGNORED_LINES = 16  # elements probes found ignored, checked along a line each
# lines read through an elementwise input: every evaluation moves them all, but each keeps
# its samples (a million elements × 513 positions would be gigabytes)
MAX_ELEMENTWISE_LINES = 2048
BISECT = 10  # halvings that place a gate's edge (to 1/1000 of the spacing)


@dataclass(frozen=True)
class Coarse:
    """The coarse-scale check of one input's surrogate: the range swept, the flat positions
    of the elements whose lines were read (in the order of the reading's lines), the reading,
    the gate's edges placed by bisection (per line, NaN where not gated), and whether the
    lines moved together (each output element follows its own input element)."""

    name: str
    low: float
    high: float
    elements: torch.Tensor
    reading: Reading
    edges: tuple[torch.Tensor, torch.Tensor]
    together: bool = True  # the lines moved at once (an elementwise input), or one at a time


def span(x: torch.Tensor, domain: tuple[float, float] | None = None) -> tuple[float, float]:
    """The range a line sweeps: the input's values and half their spread again on either side
    (at least 2 on either side), inside the target's domain where it has one."""
    values = x.detach().double().reshape(-1)
    values = values[torch.isfinite(values)]
    lo, hi = (float(values.min()), float(values.max())) if values.numel() else (0.0, 0.0)
    margin = max(hi - lo, 4.0) / 2
    low, high = lo - margin, hi + margin
    if domain is not None:
        low, high = max(low, domain[0]), min(high, domain[1])
    return low, high


class Sweep:
    """Evaluations of `forward` with input `name` moved (everything else as in `values`)."""

    def __init__(self, forward: Forward, values: Mapping[str, torch.Tensor], name: str,
                 upstream: torch.Tensor, cost: int) -> None:
        self.forward = forward
        self.values = {n: v.detach() for n, v in values.items()}
        self.name = name
        self.x = self.values[name]
        self.upstream = upstream.detach().to(self.x.dtype)
        self.cost = max(1, cost)
        self.elementwise = False

    def probe(self, low: float, high: float) -> bool:
        """Whether each output element follows its own element of the input alone, with moves
        across the range: for every bit b of the element index, the elements whose bit is 1
        (then 0) jump to the range's top (bottom); an output element that changes although its own
        element stayed depends on another one (2·log2(n) calls). False also when no move
        changed anything."""
        x = self.x
        try:
            out = self.forward(self.values).detach()
            if torch.broadcast_shapes(tuple(x.shape), tuple(out.shape)) != tuple(out.shape):
                return False
        except Exception:  # (the sweep then tells nothing anyway)
            return False
        index = torch.arange(x.numel(), device=x.device).reshape(x.shape)
        changed = False
        for bit in range(max(1, (x.numel() - 1).bit_length())):
            ones = ((index >> bit) & 1).bool()
            for chosen, end in ((ones, high), (~ones, low)):
                moved = torch.where(chosen, torch.full_like(x, end), x)
                try:
                    now = self.forward({**self.values, self.name: moved}).detach()
                except Exception:
                    return False
                differs = (now != out) & ~(torch.isnan(now) & torch.isnan(out))
                if bool((differs & ~chosen.expand(out.shape)).any()):
                    return False
                changed |= bool(differs.any())
        self.elementwise = changed
        return changed

    def points(self, lines: int) -> int:
        """Positions per line that the work budget allows (odd: the middle is a position)."""
        lines = 1 if self.elementwise else max(1, lines)
        calls = min(WORK / self.cost, MAX_EVALUATIONS) / lines
        most = POINTS if self.elementwise else ALONE_POINTS
        return int(max(MIN_POINTS, min(most, calls)) // 2 * 2 + 1)

    def check(self, elements: torch.Tensor, low: float, high: float) -> Coarse:
        """Read the lines of `elements` (flat positions; all of them for an elementwise input,
        else one line each) over [low, high]."""
        t = torch.linspace(low, high, self.points(len(elements)), dtype=torch.float64)
        shift = NEAR * (high - low)
        f, g, near = [], [], []
        for position in t.tolist():
            phi, slope = self._at(torch.full((len(elements),), position,
                                             dtype=self.x.dtype), elements)
            f.append(phi)
            g.append(slope)
            near.append(self._at(torch.full((len(elements),), position + shift,
                                            dtype=self.x.dtype), elements, slope=False)[0])
        unit = self._unit(elements)
        lines = Lines(t, torch.stack(f), torch.stack(g), unit, torch.stack(near))
        reading = read(lines)
        edges = self._edges(reading, t, elements)
        return Coarse(self.name, low, high, elements, with_edges(reading, *edges), edges,
                      self.elementwise)

    def moves(self, elements: torch.Tensor, low: float, high: float) -> torch.Tensor:
        """Whether the output changes anywhere along each element's line (moved alone, forward
        only): what a handful of probe values can miss (two spiking rows whose counts trade
        places at every probe) a line of positions finds."""
        base = self._output(self.x)
        out = torch.zeros(len(elements), dtype=torch.bool)
        if base is None:
            return out
        t = torch.linspace(low, high, self.points(len(elements)), dtype=torch.float64)
        for k, i in enumerate(elements.tolist()):
            for position in t.tolist():
                moved = self.x.reshape(-1).clone()
                moved[i] = position
                now = self._output(moved.reshape(self.x.shape))
                if now is None or not torch.equal(now, base):  # (refusing a value: looking)
                    out[k] = True
                    break
        return out

    def _output(self, x: torch.Tensor) -> torch.Tensor | None:
        try:
            with torch.no_grad():
                return self.forward({**self.values, self.name: x}).detach()
        except Exception:
            return None

    def _unit(self, elements: torch.Tensor) -> torch.Tensor:
        """What the slope of a gradient passed on unchanged is on each line: the upstream at
        the element's own place — an elementwise input's, or one whose output has the input's
        shape (a top-k mask's straight-through passes each element its own gradient)."""
        if not self.elementwise and tuple(self.upstream.shape) != tuple(self.x.shape):
            return torch.full((len(elements),), float("nan"), dtype=torch.float64)
        try:
            per_element = sum_to_shape(self.upstream, tuple(self.x.shape)).reshape(-1)
        except RuntimeError:  # an upstream the input does not broadcast to
            return torch.full((len(elements),), float("nan"), dtype=torch.float64)
        return per_element[elements].double().cpu()

    def _at(self, positions: torch.Tensor, elements: torch.Tensor, slope: bool = True
            ) -> tuple[torch.Tensor, torch.Tensor]:
        """(vᵀf, its derivative) on each line, its element at `positions`; NaN where the
        target refuses the values (the derivative NaN too where `slope` is not asked for)."""
        positions = positions.to(self.x.device)
        if self.elementwise:
            moved = self.x.reshape(-1).clone()
            moved[elements] = positions
            return self._evaluate(moved.reshape(self.x.shape), elements, slope)
        phis, slopes = [], []
        for k, i in enumerate(elements.tolist()):
            moved = self.x.reshape(-1).clone()
            moved[i] = positions[k]
            phi, derivative = self._evaluate(moved.reshape(self.x.shape), elements[k:k + 1],
                                             slope)
            phis.append(phi)
            slopes.append(derivative)
        return torch.cat(phis), torch.cat(slopes)

    def _evaluate(self, moved: torch.Tensor, elements: torch.Tensor, slope: bool = True
                  ) -> tuple[torch.Tensor, torch.Tensor]:
        leaf = moved.detach().requires_grad_(True)
        nan = torch.full((len(elements),), float("nan"), dtype=torch.float64)
        grad = None
        try:
            with torch.enable_grad():
                out = self.forward({**self.values, self.name: leaf})
                weighted = out * self.upstream
                if slope:
                    (grad,) = torch.autograd.grad(weighted.sum(), leaf, allow_unused=True)
        except Exception:  # the target refuses these values: this position tells nothing
            return nan, nan.clone()
        weighted = weighted.detach()
        if not slope:
            grad = torch.full_like(leaf, float("nan"))
        elif grad is None:
            grad = torch.zeros_like(leaf)
        if self.elementwise:
            phi = sum_to_shape(weighted, tuple(self.x.shape)).reshape(-1)[elements]
        else:
            phi = weighted.sum().reshape(1).expand(len(elements))
        return phi.double().cpu(), grad.detach().reshape(-1)[elements].double().cpu()

    def _edges(self, reading: Reading, t: torch.Tensor, elements: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """A gated constant surrogate's edges, placed between grid positions by bisection
        (NaN elsewhere, and at an edge the range itself bounds)."""
        step = float(t[1] - t[0]) if len(t) > 1 else 0.0
        gated = reading.gated & torch.isfinite(reading.constant)
        lo = self._bisect(reading.lo - step, reading.lo, gated & (reading.lo > t[0]), elements)
        hi = self._bisect(reading.hi + step, reading.hi, gated & (reading.hi < t[-1]),
                          elements)
        return lo, hi

    def _bisect(self, outside: torch.Tensor, inside: torch.Tensor, todo: torch.Tensor,
                elements: torch.Tensor) -> torch.Tensor:
        nan = torch.full(inside.shape, float("nan"), dtype=torch.float64)
        if not bool(todo.any()):
            return nan
        out, inn = outside.clone(), inside.clone()
        for _ in range(BISECT):
            mid = (out + inn) / 2
            _, slope = self._at(torch.where(todo, mid, inn).to(self.x.dtype), elements)
            on = slope.abs() > 0
            inn = torch.where(todo & on, mid, inn)
            out = torch.where(todo & ~on, mid, out)
        return torch.where(todo, (out + inn) / 2, nan)
