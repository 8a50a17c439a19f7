"""A wrapper is the wrapped target in every capability the mode does not override: methods,
properties and data (inputs, parameters, notes) are the wrapped target's, written through it;
what the subclass overrides wins; made ready, the wrapped target is fixed too."""

from __future__ import annotations

import pytest
import torch

from gradscope.targets import resolve
from gradscope.targets.base import Target
from gradscope.targets.wrapper import Wrapper
from tests.paths import DATA


class Doubled(Wrapper):
    @property
    def autograd_forward(self):
        forward = self.base.forward
        return lambda values: 2 * forward(values)


def test_every_capability_of_the_interface_is_forwarded():
    base = resolve("sin(x) * y")
    wrapped = Doubled(base)
    assert (wrapped.names == base.names and wrapped.symbolic() is base.symbolic()) or \
        type(wrapped.symbolic()) is type(base.symbolic())
    values = {"x": torch.tensor([0.5]), "y": torch.tensor([2.0])}
    assert torch.equal(wrapped.forward(values), base.forward(values))
    assert torch.equal(wrapped.autograd_forward(values), 2 * base.forward(values))
    public = {n for n, m in vars(Target).items() if not n.startswith("_")}
    assert public <= set(dir(wrapped))


def test_data_is_the_wrapped_targets_own_and_written_through_it():
    base = resolve(f"{DATA}/batch_rules.py:Square")
    wrapped = Doubled(base)
    wrapped.notes.append("said through the wrapper")
    wrapped.stated.add("x")
    assert "said through the wrapper" in base.notes and "x" in base.stated
    assert wrapped.text == base.text and wrapped.kind == base.kind
    assert wrapped.obj is base.obj  # (what a kind carries beyond the interface)


def test_made_ready_the_wrapped_target_is_fixed_too():
    base = resolve("x * 2")
    wrapped = Doubled(base)
    wrapped.ready()
    with pytest.raises(AttributeError, match="prepared"):
        base.notes = []
    with pytest.raises(AttributeError):
        wrapped.notes.append("late")  # (a tuple once ready)
