"""A target that runs on N ranks, seen by rank 0 (which runs the check) as one function of one
set of tensors, so that every engine, comparison and explanation of a single-process check
applies.

* **Which tensor is which** (layout.py). A tensor identical on every rank is *replicated*: one
  quantity, perturbed on every rank at once. One that differs between ranks, or that the code
  calls sharded, is *sharded*: each part an input of its own, perturbed on the ranks that hold
  it. `--sharded`/`--replicated` override.
* **The global output.** Where the ranks' outputs are identical (a tensor-parallel block's
  reduced output, DDP on the same data) it is counted once: their mean. Where they differ each
  rank's output is its own part and they are summed — each rank's backward then starts from
  the same upstream, as each rank's loss.backward() does. DDP and FSDP average (the mean).
* **Gradients.** Each rank runs `y.backward(upstream)` on a fresh call and its `.grad` is read
  after the target's own backward collectives. A part's gradient is that of the first rank
  holding it; a replicated tensor's is rank 0's; every other rank holding it must have the
  same: a rank that differs is a finding of its own (`ranks_disagree`: which tensor, which
  rank, by how much). A replicated tensor whose gradient is each rank's part (--partial-grad;
  data under DDP and FSDP) is the parts' sum, or mean.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import torch

from gradscope.errors import GradscopeError, UsageError
from gradscope.targets.base import Target
from gradscope.targets.distributed.layout import (
    layout_note,
    layout_of,
    origin_of,
    parts_notes,
    parts_of,
    ratio,
    roundoff,
    same,
)
from gradscope.targets.distributed.rank import CallSeen, Described, RankSpec, Server
from gradscope.targets.distributed.world import BUILD_SECONDS, World


@dataclass(frozen=True)
class Disagreement:
    """A replicated tensor's gradient on `rank`, apart from rank 0's by `apart` (of `scale`)."""

    name: str
    rank: int
    apart: float
    scale: float
    elements: int
    factor: float | None = None  # the other rank's gradient is this × rank 0's, where it is
    against: int = 0  # the rank it is compared with (the first that holds the tensor)


class Ranks:
    """The world's ranks as the target asks them: every rank's part built at once (`build`),
    then each command sent to every rank and rank 0's own answered by its server."""

    def __init__(self, world: World, server: Server, spec: RankSpec) -> None:
        self.world, self.server, self.spec = world, server, spec
        self.described: list[Described] = []
        self._broken = False  # a rank failed: the check is over, nothing more is asked

    def build(self) -> None:
        self.described = self._asked([("build", self.spec)] * self.world.size, BUILD_SECONDS)

    def ask(self, commands: list[tuple]) -> list[Any]:
        return self._asked(commands)

    def _asked(self, commands: list[tuple], seconds: float | None = None) -> list[Any]:
        try:
            if seconds is None:
                return self.world.ask(commands, self.server.handle)
            return self.world.ask(commands, self.server.handle, seconds)
        except BaseException:
            self._broken = True
            raise

    @property
    def backend(self) -> str:
        return "nccl" if self.world.device.startswith("cuda") else "gloo"

    def stop(self) -> None:
        """Every rank lets its part go (the user's objects; the world stays for the report)."""
        if self._broken:
            return
        self._broken = True
        with suppress(GradscopeError):
            self.world.ask([("release",)] * self.world.size, self.server.handle)


class DistributedTarget(Target):
    """The ranks' target as one function (see the module's docstring)."""

    def __init__(self, ranks: Ranks, sharded: tuple[str, ...] = (),
                 replicated: tuple[str, ...] = (), partial: tuple[str, ...] = ()) -> None:
        first: Described = ranks.described[0]
        super().__init__(ranks.spec.target, first.kind)
        self._ranks = ranks
        self.world = ranks.spec.world
        self._layout = layout_of(ranks.described, sharded, replicated)
        self._names = tuple(n for layout in self._layout.values() for n in layout.names)
        values = {}
        for base, layout in self._layout.items():
            for rank_, name in zip(layout.ranks, layout.names, strict=True):
                values[name] = ranks.described[rank_].values[base]
        self.given = values
        owned = {b for d in ranks.described for b in d.parameters}
        self._parts = parts_of(self._layout, partial, first.wrapper, owned)
        self.parameters = {n: values[n] for base, layout in self._layout.items()
                           if base in owned for n in layout.names}
        self.origins = {name: origin_of(ranks.described[rank_], base, layout.sharded, rank_,
                                      self.world)
                        for base, layout in self._layout.items()
                        for rank_, name in zip(layout.ranks, layout.names, strict=True)}
        self._mean: bool | None = None  # decided at the first evaluation
        self._disagreements: dict[tuple[str, int], Disagreement] = {}
        # each rank's gradient of every replicated tensor under the first upstream asked
        # (the table's): what a missing reduction is recognised by
        self._first: dict[str, list[torch.Tensor]] = {}
        self.notes.append(layout_note(self._layout, self.world, ranks))
        self.notes.extend(parts_notes(self._parts, first.wrapper))
        self.dtype = first.values[first.names[0]].dtype if first.names else torch.float64
        self._wrapper = first.wrapper

    @property
    def names(self) -> tuple[str, ...]:
        return self._names

    def numbers(self) -> dict[str, float]:
        """A wrong factor is often the world size (a sum where a mean belongs, or twice)."""
        return {f"the world size (--nproc {self.world})": float(self.world)}

    @property
    def spec(self) -> RankSpec:
        return self._ranks.spec

    def ranks(self) -> DistributedTarget:
        return self

    def wholes(self, values: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor | None]:
        """Each tensor as one process would hold it: a replicated one as it is, a DTensor's
        shards joined along their Shard dim; None for a shard the code does not place."""
        out: dict[str, torch.Tensor | None] = {}
        for base, layout in self._layout.items():
            if not layout.sharded:
                out[base] = values[layout.names[0]]
            elif layout.dim is not None:
                out[base] = torch.cat([values[n] for n in layout.names], dim=layout.dim)
            else:
                out[base] = None
        return out

    def finished(self) -> None:
        self._ranks.stop()

    # ------------------------------------------------------------ evaluations
    def forward(self, values: Mapping[str, torch.Tensor]) -> torch.Tensor:
        tensors = [values[n] for n in self._names]
        return _Remote.apply(self, *tensors)

    def per_rank(self, values: Mapping[str, torch.Tensor]) -> list[dict[str, torch.Tensor]]:
        """Each rank's own values: a replicated tensor everywhere, a shard on its rank."""
        out: list[dict[str, torch.Tensor]] = [{} for _ in range(self.world)]
        for base, layout in self._layout.items():
            for name, holders in layout.held():
                for rank_ in holders:
                    out[rank_][base] = values[name].detach()
        return out

    def value(self, values: Mapping[str, torch.Tensor]) -> torch.Tensor:
        outputs = self._ranks.ask([("value", v) for v in self.per_rank(values)])
        return self._combined(outputs)

    def gradients(self, values: Mapping[str, torch.Tensor], upstream: torch.Tensor
                  ) -> dict[str, torch.Tensor]:
        replies = self._ranks.ask([("grad", v, upstream.detach())
                                   for v in self.per_rank(values)])
        grads: dict[str, torch.Tensor] = {}
        for base, layout in self._layout.items():
            if layout.sharded:  # (a part several ranks hold: the same gradient on each)
                for name, holders in layout.held():
                    grads[name] = replies[holders[0]][1][base]
                    for rank_ in holders[1:]:
                        if not same(grads[name], replies[rank_][1][base], self.dtype):
                            self._disagree(name, rank_, grads[name], replies[rank_][1][base],
                                           holders[0])
                continue
            if base in self._parts:  # (each rank's part: their sum, or mean, is the gradient)
                parts = torch.stack([r[1][base] for r in replies])
                grads[layout.names[0]] = parts.sum(0) if self._parts[base] == "sum" else \
                    parts.mean(0)
                continue
            first = replies[0][1][base]
            grads[layout.names[0]] = first
            self._first.setdefault(base, [r[1][base] for r in replies])
            for rank_ in range(1, self.world):
                other = replies[rank_][1][base]
                if not same(first, other, self.dtype):
                    self._disagree(base, rank_, first, other)
        return grads

    def record(self, values: Mapping[str, torch.Tensor], upstream: torch.Tensor,
               recorder: Callable[..., Any]) -> list[list[CallSeen]]:
        """Each rank's custom Function calls in one forward and backward at `values`, recorded
        by `recorder` on the rank (a data-parallel wrapper's reduction off meanwhile)."""
        return self._ranks.ask([("record", v, upstream.detach(), recorder)
                                for v in self.per_rank(values)])

    def probe(self, index: int, argument: int, directions: list[torch.Tensor], step: float
              ) -> list[tuple[torch.Tensor | None, ...]]:
        """Each rank's outputs of recorded call `index` with argument `argument` moved by
        step × its rank's direction (all ranks at once)."""
        return self._ranks.ask([("probe", index, argument, d, step) for d in directions])

    def _disagree(self, name: str, rank: int, first: torch.Tensor, other: torch.Tensor,
                  against: int = 0) -> None:
        first, other = first.double(), other.double()
        diff, scale = (first - other).abs(), float(first.abs().max())
        found = Disagreement(name, rank, float(diff.max()), scale,
                             int((diff > roundoff(self.dtype, scale)).sum()), ratio(first, other),
                             against)
        kept = self._disagreements.get((name, rank))
        if kept is None or found.apart > kept.apart:
            self._disagreements[(name, rank)] = found

    def disagreements(self) -> list[Disagreement]:
        return list(self._disagreements.values())

    def ranks_sum(self, name: str) -> torch.Tensor | None:
        """The sum over ranks of a replicated tensor's gradients under the table's upstream."""
        grads = self._first.get(name)
        return None if grads is None else torch.stack([g.double() for g in grads]).sum(0)

    def _combined(self, outputs: list[torch.Tensor]) -> torch.Tensor:
        shapes = {tuple(o.shape) for o in outputs}
        if len(shapes) > 1:
            raise UsageError("the ranks returned outputs of different shapes ("
                             + ", ".join(f"rank {r}: {tuple(o.shape)}"
                                         for r, o in enumerate(outputs))
                             + "); return an output every rank has in full (gather a "
                             "sharded output first)")
        if self._mean is None:
            identical = all(same(outputs[0], o, self.dtype)
                            for o in outputs[1:])
            self._mean = identical or bool(self._wrapper)
            how = ("identical on every rank: counted once" if identical else
                   f"each rank's its own part under {self._wrapper}: their mean, as it "
                   "averages gradients" if self._wrapper else
                   "different on each rank: each rank's output is its part, and the parts are "
                   "summed (each rank's backward starts from the same upstream)")
            self._notes_after = [f"the ranks' outputs were {how}"]
        stacked = torch.stack([o.double() for o in outputs])
        combined = stacked.mean(0) if self._mean else stacked.sum(0)
        return combined.to(outputs[0].dtype)

    def observed(self) -> list[str]:
        return [*super().observed(), *getattr(self, "_notes_after", [])]


class _Remote(torch.autograd.Function):
    """The ranks' evaluation as one autograd node of rank 0's check: forward asks every rank
    for its output; backward asks every rank for `y.backward(upstream)` at the same values."""

    @staticmethod
    def forward(ctx: Any, target: DistributedTarget, *tensors: torch.Tensor) -> torch.Tensor:
        ctx.target = target
        ctx.values = dict(zip(target.names, (t.detach() for t in tensors), strict=True))
        return target.value(ctx.values)

    @staticmethod
    def backward(ctx: Any, upstream: torch.Tensor) -> tuple:
        plain = upstream.detach().contiguous()
        plain.untyped_storage()  # (raises for a batched tensor: vmap falls back to a loop)
        grads = ctx.target.gradients(ctx.values, plain)
        return (None, *(grads[n] for n in ctx.target.names))


