"""Every backward gradscope runs counts: a backward wrong on one of gradscope's calls only (NaN
or ×1.5 on the k-th, or on every second) fails, whichever call it is and whichever command
asks — each call either feeds a comparison or is compared with the first for its upstream —
and its right twin passes."""

from __future__ import annotations

import pytest
import torch

import gradscope
from tests.data.call_dependent import counted, wrong_on

COMMANDS = {"check": gradscope.check, "jvp": gradscope.jvp, "jacobian": gradscope.jacobian}


def _calls(command: str, size: int) -> int:
    right = counted()
    report = COMMANDS[command](right, torch.linspace(-2, 2, size, dtype=torch.float64))
    assert report.passed
    return right.calls


@pytest.mark.parametrize("size", [5, 40])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_backward_wrong_on_any_one_call_fails(command, size):
    x = torch.linspace(-2, 2, size, dtype=torch.float64)
    calls = _calls(command, size)
    assert calls >= 2
    passed = [(k, how) for k in range(1, calls + 1) for how in ("nan", "scale")
              if COMMANDS[command](wrong_on(k, how), x).passed]
    assert passed == []


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("how", ["nan", "scale"])
def test_a_backward_wrong_on_every_second_call_fails_as_nondeterministic(command, how):
    report = COMMANDS[command](wrong_on(0, how, every=2), torch.linspace(-2, 2, 5,
                                                                         dtype=torch.float64))
    assert not report.passed
    assert any(f.kind == "nondeterministic_backward" for f in report.failures)


def test_the_second_call_wrong_is_named_as_the_flow_traces_run():
    report = gradscope.check(wrong_on(2, "scale"), torch.linspace(-2, 2, 5,
                                                                  dtype=torch.float64))
    found = [d for d in report.diagnostics if d.kind == "nondeterministic_backward"]
    assert found and "gradient-flow trace" in found[0].message
