"""--plain as a run mode: every evaluation an ordinary call (grad mode, inputs requiring grad,
one at a time, no watched forward), the verdict the shortcuts give, and a target already
compiled asking for it itself."""

from __future__ import annotations

import torch

import gradscope
from gradscope.options import Options
from gradscope.targets import resolve
from gradscope.targets.ordinary import MODE, Ordinary
from tests.paths import DATA


def test_the_wrapper_calls_ordinarily_and_never_batches_or_watches():
    base = resolve(f"{DATA}/batch_rules.py:Square")
    base.bind_arguments({}, ())
    wrapped = MODE.wrap(base, Options(plain=True))
    assert isinstance(wrapped, Ordinary)
    assert not wrapped.batchable and not wrapped.watchable and base.watchable
    x = torch.tensor([1.0, -2.0], dtype=torch.float64)
    traced, notes = wrapped.for_values(base.forward({"x": x.requires_grad_()}))
    value, branches = traced({"x": x.detach()})
    assert torch.equal(value, x.detach() ** 2) and branches == []
    assert not value.requires_grad and any("--plain" in n for n in notes)


def test_asked_for_the_verdict_is_the_same_and_said():
    report = gradscope.check(f"{DATA}/batch_rules.py:Square", plain=True)
    assert report.passed
    assert any("--plain: every evaluation is an ordinary call" in n for n in report.notes)
