"""Quiet layers: a model's tensors far quieter than their neighbours, for models only.

Quiet layers: a layer with a weight matrix whose gradient is orders of magnitude below its
neighbours' (or zero) is said once, naming its tensors; normalisation scales, plain inputs and
ordinary differences are not."""

from __future__ import annotations

import gradscope
from gradscope.features.layers import QUIET_RATIO, LayerStats, quiet_layers
from tests.paths import DATA


def test_a_quiet_layer_is_a_warning_of_a_model_only():
    report = gradscope.check(f"{DATA}/stack.py:gated_loss", at={"x": "randn(2,4,16)"})
    assert [d.where for d in report.diagnostics if d.kind == "quiet_layer"] == [
        "gated.inner.blocks.1.fc1"]
    plain = gradscope.check("x * 1e-9 + y", x="1,2", y="3,4")
    assert not [d for d in plain.diagnostics if d.kind == "quiet_layer"]


def _layer(name: str, norm: float, shape=(4, 4)) -> list[LayerStats]:
    return [LayerStats(f"{name}.weight", "parameter", shape, 16, norm),
            LayerStats(f"{name}.bias", "parameter", (4,), 4, norm / 10)]


def test_a_layer_far_below_its_neighbours_is_quiet():
    stats = _layer("fc1", 1.0) + _layer("fc2", 1e-6) + _layer("fc3", 2.0)
    (found,) = quiet_layers(stats)
    assert found.kind == "quiet_layer" and found.module == "fc2"
    assert found.inputs == ["fc2.weight", "fc2.bias"] and found.count == 20
    assert "fc1 1" in found.message and "fc3 2.01" in found.message


def test_ordinary_differences_zero_and_what_is_not_compared():
    assert quiet_layers(_layer("a", 1.0) + _layer("b", QUIET_RATIO * 2)) == []
    (zero,) = quiet_layers(_layer("a", 1.0) + _layer("b", 0.0))
    assert "no gradient at all" in zero.message
    norms = [LayerStats("norm.weight", "parameter", (4,), 4, 1e-9)]  # no matrix: not a layer
    inputs = [LayerStats("x", "input", (4, 4), 16, 1e-9)]
    assert quiet_layers(_layer("a", 1.0) + norms + inputs + _layer("b", 1.0)) == []
