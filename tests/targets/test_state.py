"""A module's own state between calls: put back after every call of gradscope's, so that every
evaluation starts from the same state and the user's module is left as it was found."""

from __future__ import annotations

import torch
from torch import nn

import gradscope
from gradscope.targets.state import state_of
from tests.data.plainway import Leaky
from tests.paths import DATA

PLAIN = f"{DATA}/plainway.py"


class _Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.scale = torch.ones(2)

    def forward(self, x):
        self.calls += 1
        self.scale.mul_(2)  # (in place: the same tensor, its contents changed)
        self.cache = x.detach()  # (an attribute the call adds)
        return x * self.scale


def test_attributes_reassigned_written_in_place_or_added_are_put_back():
    module = _Counter()
    state = state_of(module)
    module(torch.ones(2))
    assert module.calls == 1 and module.scale.tolist() == [2.0, 2.0]
    assert sorted(state.restore()) == ["cache", "calls", "scale"]
    assert module.calls == 0 and module.scale.tolist() == [1.0, 1.0]
    assert not hasattr(module, "cache") and state.restore() == []  # (nothing changed since)


def test_a_stateful_module_is_checked_from_its_state_and_left_as_found():
    report = gradscope.check(f"{PLAIN}:Leaky", at={"x": "randn(4)"})
    assert report.passed and report.inputs[0].status_counts == {"ok": 4}
    assert any("keeps state between calls (mem)" in n for n in report.notes)
    wrong = gradscope.check(f"{PLAIN}:LeakyBug", at={"x": "randn(4)"})
    assert not wrong.passed and wrong.inputs[0].status == "mismatch"


def test_the_users_own_module_object_is_left_as_it_was():
    module = Leaky()
    assert gradscope.check(module, torch.randn(3, dtype=torch.float64)).passed
    assert module.mem is None
