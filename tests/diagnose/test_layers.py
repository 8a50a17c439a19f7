"""Quiet layers: a layer with a weight matrix whose gradient is orders of magnitude below its
neighbours' (or zero) is said once, naming its tensors; normalisation scales, plain inputs and
ordinary differences are not."""

from __future__ import annotations

from gradscope.diagnose.layers import QUIET_RATIO, LayerStats, quiet_layers


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
