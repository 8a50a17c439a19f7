"""Input shapes a target tells by itself: what a module's first layer takes."""

from __future__ import annotations

import torch


def first_layer_shape(layer: torch.nn.Module) -> tuple[int, ...] | None:
    """The input shape a layer takes (batch 2, spatial size 8), or None for other layers."""
    nn = torch.nn
    if isinstance(layer, nn.Linear):
        return (2, layer.in_features)
    convs = {nn.Conv1d: 1, nn.Conv2d: 2, nn.Conv3d: 3}
    for kind, dims in convs.items():
        if isinstance(layer, kind):
            return (2, layer.in_channels, *([8] * dims))
    if isinstance(layer, nn.LayerNorm):
        return (2, *layer.normalized_shape)
    norms = {nn.BatchNorm1d: 0, nn.BatchNorm2d: 2, nn.BatchNorm3d: 3}
    for kind, dims in norms.items():
        if isinstance(layer, kind):
            return (2, layer.num_features, *([8] * dims))
    return None


def module_input_shape(module: torch.nn.Module | None) -> tuple[tuple[int, ...], str] | None:
    """A module's input shaped for its first layer that tells (Linear, Conv, LayerNorm,
    BatchNorm), with a batch of 2, else like its first parameter (`input * self.weight`), and
    the reason to show; None when nothing tells."""
    if module is None:
        return None
    for layer in module.modules():
        shape = first_layer_shape(layer)
        if shape is not None:
            return shape, f"shaped for {layer!r} (the module's first layer)"
    for name, param in module.named_parameters():
        if param.dim():
            return tuple(param.shape), (f"shaped like the module's first parameter {name} (no "
                                        "layer says what it takes)")
    return None
