"""An nn.Module as a target: built from --init or given, checked on gradscope's own copy, its
parameters inputs with role parameter."""

from __future__ import annotations

import sys

import pytest
import torch

import gradscope
from gradscope.errors import TargetError
from gradscope.targets import resolve
from tests.paths import BUGGY, EXAMPLES, SEEDS


def test_module_parameters_become_inputs():
    t = resolve(f"{SEEDS}:MyLayer", init={"size": 2})
    assert t.kind == "module" and t.names == ("input", "mytensor")
    assert t.roles() == {"input": "input", "mytensor": "parameter"}
    assert t.parameters["mytensor"].shape == (2, 2)


def test_seed_mylayer_as_written_gets_the_super_init_hint():
    with pytest.raises(TargetError) as info:
        resolve(f"{BUGGY}:MyLayer")
    message = str(info.value)
    assert "torch.tensor(3, 3)" in message and "super().__init__()" in message
    assert len(message.splitlines()) <= 8


def test_module_instance_grad_is_left_alone():
    sys.path.insert(0, str(EXAMPLES))
    try:
        from seed_functions import MyLayer
    finally:
        sys.path.pop(0)
    layer = MyLayer()
    layer(torch.ones(3)).sum().backward()
    before = layer.mytensor.grad.clone()
    report = gradscope.check(layer, torch.randn(3))
    assert report.passed and torch.equal(layer.mytensor.grad, before)
    assert any(".grad" in n for n in report.notes)
