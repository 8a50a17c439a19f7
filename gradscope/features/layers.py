"""A model's layers that barely learn: each tensor's gradient norm beside the others'
(diagnose/layers.py), for targets with parameters only."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from gradscope.diagnose.layers import LayerStats, quiet_layers
from gradscope.features.base import Context, Feature, Said
from gradscope.report.modules import is_model


class Layers(Feature):
    name = "layers"

    def diagnose(self, ctx: Context, verdict: Any, said: Mapping[str, Said]) -> Said:
        prepared, grads = ctx.prepared, ctx.evidence.backward.grads
        if grads is None or not is_model(prepared.target.roles()):
            return Said()
        roles = prepared.target.roles()
        stats = []
        for name in prepared.target.names:
            g = grads[name].detach().to(torch.float64)
            norm = float(torch.linalg.vector_norm(g)) if g.numel() else 0.0
            stats.append(LayerStats(name, roles.get(name, "input"), tuple(g.shape), g.numel(),
                                    norm))
        return Said(tuple(quiet_layers(stats)))


FEATURE = Layers()
