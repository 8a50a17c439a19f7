"""How the ranks' tensors are laid out as the inputs of one function: each replicated (one
quantity, perturbed on every rank at once) or sharded (an input per part, `NAME@rankR`, a part
several ranks hold named by all of them: `NAME@rank0+1`), decided by the user's options, then
what the code says, then the values; the replicated tensors whose gradient each rank holds a
part of; equality across ranks up to round-off."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from gradscope.errors import UsageError
from gradscope.targets.distributed.rank import Described

ROUNDOFF = 64  # ulps (of the largest magnitude) within which ranks' values are the same


def same(a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype | None = None) -> bool:
    """Equal up to the round-off of `dtype` (a's own by default; exactly, for integers),
    compared in float64."""
    if a.shape != b.shape:
        return False
    dtype = dtype or a.dtype
    if torch.equal(a, b) or not dtype.is_floating_point:
        return bool(torch.equal(a, b))
    a, b = a.double(), b.double()
    scale = float(torch.maximum(a.abs(), b.abs()).max()) if a.numel() else 0.0
    return bool(((a - b).abs() <= roundoff(dtype, scale)).all())


def roundoff(dtype: torch.dtype, scale: float) -> float:
    """How far values of magnitude `scale` computed in `dtype` may differ between ranks."""
    return ROUNDOFF * torch.finfo(dtype).eps * max(scale, 1e-300)


def ratio(first: torch.Tensor, other: torch.Tensor) -> float | None:
    """c where other = c × first at every element (first nonzero somewhere), else None."""
    big = first.abs() > 1e-12 * float(first.abs().max()) if first.numel() else first
    if not bool(big.any()):
        return None
    c = float((other[big] / first[big]).median())
    return c if bool(torch.allclose(other, c * first, rtol=1e-6, atol=1e-12)) else None


@dataclass(frozen=True)
class Layout:
    """One tensor of the ranks' target: sharded (a name per rank) or replicated, and why."""

    sharded: bool
    names: tuple[str, ...]
    ranks: tuple[int, ...]  # the first rank holding each part (whose values it takes)
    why: str
    holders: tuple[tuple[int, ...], ...] = ()  # every rank holding each part

    def held(self) -> list[tuple[str, tuple[int, ...]]]:
        """Each part's name and the ranks that hold it."""
        return list(zip(self.names, self.holders or tuple((r,) for r in self.ranks),
                        strict=True))

    @property
    def dim(self) -> int | None:
        """The dim the code says it is split along (a DTensor's Shard placement, Megatron's
        partition_dim), None where it does not say."""
        found = re.search(r"S\((\d+)\)|partition_dim (\d+)", self.why) if self.sharded \
            else None
        return int(found.group(1) or found.group(2)) if found else None


def parts_of(layout: Mapping[str, Layout], partial: tuple[str, ...], wrapper: str,
           owned: set[str]) -> dict[str, str]:
    """The replicated tensors whose gradient each rank holds a part of, and how the parts
    make the gradient: --partial-grad's are summed; under DDP or FSDP each input the wrapper
    does not reduce (data, not its parameters) is each rank's own part, and the output being
    the ranks' mean, so is its gradient."""
    _matching(list(layout), partial, "--partial-grad")
    out = {}
    for name, lay in layout.items():
        if lay.sharded:
            continue
        if any(fnmatch.fnmatchcase(name, p) for p in partial):
            out[name] = "sum"
        elif wrapper and name not in owned:
            out[name] = "mean"
    return out


def parts_notes(parts: Mapping[str, str], wrapper: str) -> list[str]:
    summed = sorted(n for n, how in parts.items() if how == "sum")
    averaged = sorted(n for n, how in parts.items() if how == "mean")
    notes = []
    if summed:
        notes.append("--partial-grad: the gradients of " + ", ".join(summed) + " are each "
                     "rank's part; their sum over ranks is compared")
    if averaged:
        notes.append(f"under {wrapper} the gradients of " + ", ".join(averaged) + " (inputs it "
                     "does not reduce: each rank's data) are each rank's part; their mean over "
                     "ranks is compared, as the output is the ranks' mean")
    return notes


def layout_of(described: list[Described], sharded: tuple[str, ...],
            replicated: tuple[str, ...]) -> dict[str, Layout]:
    """Each tensor's layout over the ranks; a DTensor shard with no elements on some ranks (an
    uneven split) is an input on the ranks that hold some of it."""
    first = described[0]
    held = [set(d.names) for d in described]
    everywhere = [held[r] | set(d.empty) for r, d in enumerate(described)]
    if any(e != everywhere[0] for e in everywhere[1:]):
        other = next(d for d, e in zip(described, everywhere, strict=True) if e != everywhere[0])
        raise UsageError("the ranks built targets with different inputs (rank 0: "
                         f"{', '.join(first.names)}; another: {', '.join(other.names)})")
    order = list(dict.fromkeys(n for d in described for n in d.names))
    _matching(order, sharded, "--sharded")
    _matching(order, replicated, "--replicated")
    out = {}
    for name in order:
        is_sharded, why = _decided(name, described, sharded, replicated)
        ranks = tuple(r for r in range(len(described)) if name in held[r])
        if is_sharded:
            groups = _holders(name, ranks, described)
            out[name] = Layout(True, tuple(f"{name}@rank{'+'.join(map(str, g))}"
                                           for g in groups),
                               tuple(g[0] for g in groups), why, groups)
        elif len(ranks) < len(described):
            raise UsageError(f"{name} has no elements on some ranks, yet nothing says it is "
                             "sharded: give --sharded " + name)
        else:
            out[name] = Layout(False, (name,), (0,), why, (ranks,))
    return out


def _matching(names: list[str], patterns: tuple[str, ...], flag: str) -> None:
    """Each pattern the user gave matches some tensor (a typo is said, not ignored)."""
    for pattern in patterns:
        if not any(fnmatch.fnmatchcase(n, pattern) for n in names):
            listed = ", ".join(names[:12]) + (" …" if len(names) > 12 else "")
            raise UsageError(f"{flag} {pattern}: matches no tensor of the target; its tensors "
                             f"are: {listed}")


def _holders(name: str, ranks: tuple[int, ...], described: list[Described]
             ) -> tuple[tuple[int, ...], ...]:
    """The ranks that hold each part of a sharded tensor: grouped by the DTensor part each
    holds (a tensor sharded on one mesh dim and replicated on another), else each its own."""
    keys = [described[r].parts.get(name) for r in ranks]
    if any(k is None for k in keys):
        return tuple((r,) for r in ranks)
    groups: dict[tuple, list[int]] = {}
    for rank, key in zip(ranks, keys, strict=True):
        groups.setdefault(key, []).append(rank)
    return tuple(tuple(g) for g in groups.values())


def _decided(name: str, described: list[Described], sharded: tuple[str, ...],
             replicated: tuple[str, ...]) -> tuple[bool, str]:
    """Sharded or replicated: the user's option, then what the code says, then the values."""
    first = described[0]
    if any(fnmatch.fnmatchcase(name, p) for p in sharded):
        return True, "--sharded"
    if any(fnmatch.fnmatchcase(name, p) for p in replicated):
        return False, "--replicated"
    said = first.said.get(name)
    if said:
        return said.startswith("sharded"), said.split(": ", 1)[1]
    if first.wrapper and name in first.parameters:
        return False, f"{first.wrapper} keeps it the same on every rank"
    values = [d.values[name] for d in described if name in d.values]
    if len(values) == len(described) and all(same(values[0], v) for v in values[1:]):
        return False, "its values are the same on every rank"
    return True, "its values differ between ranks"


def origin_of(described: Described, base: str, sharded: bool, rank: int, world: int) -> str:
    made = described.origins.get(base, "")
    if sharded:
        return f"rank {rank}'s part of {base}" + (f" ({made})" if made else "")
    return f"{made} · the same on all {world} ranks" if made else f"the same on all {world} ranks"


def layout_note(layout: Mapping[str, Layout], world: int, ranks: Any) -> str:
    sharded = [n for n, lay in layout.items() if lay.sharded]
    replicated = [n for n, lay in layout.items() if not lay.sharded]
    parts = []
    if replicated:
        parts.append("replicated (one quantity, perturbed on every rank at once): "
                     + ", ".join(f"{n} ({layout[n].why})" for n in replicated[:6])
                     + (" …" if len(replicated) > 6 else ""))
    if sharded:
        parts.append("sharded (each rank's part an input of its own, NAME@rankR): "
                     + ", ".join(f"{n} ({layout[n].why})" for n in sharded[:6])
                     + (" …" if len(sharded) > 6 else ""))
    how = {"gradscope": "started by torch's elastic launch", "torchrun": "under torchrun",
           "srun": "under srun", "env": "placed by the environment"}.get(
        ranks.world.launcher, ranks.world.launcher)
    return f"{world} ranks ({ranks.backend}, {how}); " + "; ".join(parts)
