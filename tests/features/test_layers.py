"""Quiet layers: a model's tensors far quieter than their neighbours, for models only."""

from __future__ import annotations

import gradscope
from tests.paths import DATA


def test_a_quiet_layer_is_a_warning_of_a_model_only():
    report = gradscope.check(f"{DATA}/stack.py:gated_loss", at={"x": "randn(2,4,16)"})
    assert [d.where for d in report.diagnostics if d.kind == "quiet_layer"] == [
        "gated.inner.blocks.1.fc1"]
    plain = gradscope.check("x * 1e-9 + y", x="1,2", y="3,4")
    assert not [d for d in plain.diagnostics if d.kind == "quiet_layer"]
