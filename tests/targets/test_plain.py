"""A plain function as a target: its tensor parameters are inputs, the modules it reaches or
takes are held as copies and their parameters checked too."""

from __future__ import annotations

import torch

from gradscope.targets import resolve
from gradscope.targets.plain import CallableTarget, build
from tests.paths import DATA


def test_any_callable_that_is_not_a_class():
    assert isinstance(build(lambda x: x * 2, "f", {}, {}), CallableTarget)
    assert build(torch.nn.Linear, "Linear", {}, {}) is None  # a class: another kind's
    assert build(3, "three", {}, {}) is None


def test_the_modules_it_reaches_are_held_as_copies():
    from tests.data.models import model

    target = resolve(f"{DATA}/models.py:loss")
    assert target.kind == "function" and target.names[0] == "x"
    assert set(target.names[1:]) == {"model.0.weight", "model.0.bias", "model.2.weight",
                                     "model.2.bias"}
    assert target.module is not None and target.owned
    held = dict(target.module.named_parameters())["model.0.weight"]
    assert held is not model[0].weight  # a copy: the user's module is never touched
    assert any("reaches module(s) model" in n for n in target.notes)
