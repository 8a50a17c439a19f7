"""A model's layers that barely learn: tensors whose gradient is orders of magnitude below
their neighbours' (or exactly zero) where the rest of the model learns, for targets with
parameters only. A warning, not a mismatch: autograd may be right that almost nothing reaches
them."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from gradscope.features.base import Context, Diagnosis, Feature
from gradscope.report.model import Diagnostic
from gradscope.report.modules import is_model, module_of

QUIET_RATIO = 1e-3  # a layer this much below a neighbour is quiet (the larger neighbour: a run
# of quiet layers must not hide one another)


@dataclass(frozen=True)
class LayerStats:
    """One tensor's gradient in numbers: what quiet layers are found from."""

    name: str
    role: str
    shape: tuple[int, ...]
    total: int
    grad_norm: float | None


def quiet_layers(inputs: Iterable[LayerStats]) -> list[Diagnostic]:
    """One diagnostic per layer (a module holding a weight matrix directly) whose gradient
    norm is below QUIET_RATIO × a neighbouring such layer's, in parameter order."""
    norms: dict[str, float] = {}
    members: dict[str, list[str]] = {}
    sizes: dict[str, int] = {}
    matrices: set[str] = set()
    for item in inputs:
        if item.role != "parameter" or item.grad_norm is None:
            continue
        layer = module_of(item.name)
        norms[layer] = math.hypot(norms.get(layer, 0.0), item.grad_norm)
        members.setdefault(layer, []).append(item.name)
        sizes[layer] = sizes.get(layer, 0) + item.total
        if len(item.shape) >= 2:
            matrices.add(layer)
    # layers with a weight matrix (linear, convolution, embedding) are compared with each other;
    # normalisation layers' scales and shifts live on another scale of their own
    layers = [n for n in norms if n in matrices]
    found = []
    for k, layer in enumerate(layers):
        around = [norms[n] for n in layers[max(k - 1, 0):k + 2] if n != layer]
        if not around or norms[layer] >= QUIET_RATIO * max(around):
            continue
        neighbours = ", ".join(f"{n} {norms[n]:.3g}" for n in layers[max(k - 1, 0):k + 2]
                               if n != layer)
        what = "no gradient at all" if norms[layer] == 0 else \
            f"a gradient norm of {norms[layer]:.3g}"
        found.append(Diagnostic(
            kind="quiet_layer", op="layer", where=layer, inputs=members[layer], module=layer,
            count=sizes[layer],
            message=f"{layer} gets {what}, against {neighbours} next to it: it will barely "
                    "learn while they do",
            hint="look for what cuts it off: a detach, a saturated or piecewise-constant op "
                 "before it (see gradient flow), a zero-initialised layer after it, or a "
                 "learning rate per layer"))
    return found


class Layers(Feature[None]):
    name = "layers"

    def diagnose(self, ctx: Context, verdict: Any, said: Mapping[str, Diagnosis]) -> Diagnosis:
        prepared, grads = ctx.prepared, ctx.evidence.backward.grads
        if grads is None or not is_model(prepared.target.roles()):
            return Diagnosis()
        roles = prepared.target.roles()
        stats = []
        for name in prepared.target.names:
            g = grads[name].detach().to(torch.float64)
            norm = float(torch.linalg.vector_norm(g)) if g.numel() else 0.0
            stats.append(LayerStats(name, roles.get(name, "input"), tuple(g.shape), g.numel(),
                                    norm))
        return Diagnosis(tuple(quiet_layers(stats)))


FEATURE = Layers()
