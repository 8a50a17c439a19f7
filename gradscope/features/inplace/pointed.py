"""Projections pointed at by a culprit: a model checked at scale whose random projections over
every tensor agree can still hide a wrong inner Function whose own tensors are a sliver of the
gradient's norm (an RMSNorm's weights: 37 × 2,048 of a 10⁹-parameter Llama's elements, where a
1 % error of theirs is 10⁻⁶ of the whole norm and no sampled element falls on them). The
in-place check names such a Function, but its comparison is not of the target (rule 1: it
explains, never decides). Where the argument it is wrong for is one of the target's own
tensors (a module's parameter handed to it), the target's gradient is projected along random
directions over those tensors alone — evidence about the named target, as sensitive as those
tensors' own gradient allows — and a disagreement is drilled down among them, as the
projections over every tensor are."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from gradscope.features.inplace.calls import storage
from gradscope.features.inplace.culprits import ClassCheck, argument_names
from gradscope.features.projections import Composition, composed
from gradscope.report.model import NamedCheck
from gradscope.report.status import Status


@dataclass(frozen=True)
class ArgumentProjections:
    """The projections over the target's tensors one wrong Function received as `argument`."""

    label: str  # the Function's backward, as the culprit names it
    argument: str
    composition: Composition


def suspects(checks: Sequence[ClassCheck], values: Mapping[str, torch.Tensor]
             ) -> list[tuple[ClassCheck, str, tuple[str, ...]]]:
    """Per wrong class and argument: the target's tensors its wrong calls received there (the
    same storage, shape and dtype), in the order the calls came."""
    by_storage = {storage(t): n for n, t in values.items()}
    out = []
    for check in checks:
        found: dict[str, list[str]] = {}
        for wrong in check.wrong:
            if wrong.call is None or wrong.nonlinear:
                continue
            names = argument_names(wrong.call)
            where = wrong.call.extra.get("storage", ())
            for name, key in zip(names, where, strict=False):
                hit = by_storage.get(key) if key is not None and name == wrong.argument \
                    else None
                if hit is not None and hit not in found.setdefault(name, []):
                    found[name].append(hit)
        out += [(check, argument, tuple(hits)) for argument, hits in found.items() if hits]
    return out


def projected(checks: Sequence[ClassCheck], values: Mapping[str, torch.Tensor], fd, grads,
              upstream: torch.Tensor, atol: float, rtol: float, seed: int
              ) -> tuple[ArgumentProjections, ...]:
    """The pointed projections of every wrong class's argument that is the target's own."""
    return tuple(ArgumentProjections(check.label, argument,
                         composed(fd, grads, upstream, names, atol, rtol, seed,
                                  pointed=True))
                 for check, argument, names in suspects(checks, values))


def rows(found: Sequence[ArgumentProjections]) -> list[NamedCheck]:
    """One check per projection: failing where it disagrees (the target's own evidence)."""
    out = []
    for p in found:
        tensors = p.composition.order
        what = (f"{len(tensors)} tensors" if len(tensors) > 1 else tensors[0])
        for along in p.composition.projections:
            label = (f"projection #{along.index + 1} over the tensors {p.label} receives as "
                     f"{p.argument} ({what})")
            out.append(along.check(label, p.composition.start or tensors[-1]))
    return out


def placed(found: Sequence[ArgumentProjections]) -> dict[str, Status]:
    """The tensors the pointed drill-down placed a wrong gradient at."""
    return {p.composition.start: Status.MISMATCH for p in found
            if p.composition.start is not None}
