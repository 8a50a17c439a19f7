"""The shape a module tells for its input: its first layer's, with a batch of 2."""

from __future__ import annotations

import torch
from torch import nn

from gradscope.targets.shapes import first_layer_shape, module_input_shape


def test_each_kind_of_first_layer():
    assert first_layer_shape(nn.Linear(5, 3)) == (2, 5)
    assert first_layer_shape(nn.Conv2d(3, 4, 3)) == (2, 3, 8, 8)
    assert first_layer_shape(nn.Conv1d(2, 4, 3)) == (2, 2, 8)
    assert first_layer_shape(nn.LayerNorm([6])) == (2, 6)
    assert first_layer_shape(nn.BatchNorm2d(7)) == (2, 7, 8, 8)
    assert first_layer_shape(nn.ReLU()) is None


def test_a_model_is_shaped_for_the_first_layer_that_tells():
    model = nn.Sequential(nn.ReLU(), nn.Linear(4, 2), nn.Linear(2, 9))
    shape, why = module_input_shape(model)
    assert shape == (2, 4) and "Linear(in_features=4" in why
    assert module_input_shape(nn.Sequential(nn.Tanh())) is None
    assert module_input_shape(None) is None
    assert model(torch.zeros(shape)).shape == (2, 9)
