"""Recording each custom Function call: its arguments, the gradient it received and what its
backward returned; `apply` restored afterwards, subclasses still running their own code."""

from __future__ import annotations

import pytest
import torch

from gradscope.diagnose.calls import classes, record
from tests.data import branches, culprits

X = torch.linspace(-2, 2, 5, dtype=torch.float64)
ONES = torch.ones(5, dtype=torch.float64)


def test_calls_record_arguments_and_both_gradients():
    def forward(v):
        return branches.LeakySwishBug.apply(2 * branches.LeakySwish.apply(v["x"]))

    first, second = record(forward, {"x": X}, ONES)
    assert (first.cls, second.cls) == (branches.LeakySwish, branches.LeakySwishBug)
    assert torch.equal(first.args[0], X)
    assert torch.allclose(first.received[0], 2 * second.returned[0])  # through the 2·
    assert torch.equal(second.received[0], ONES)


def test_apply_is_restored_and_subclasses_run_their_own_backward():
    own = dict(branches.LeakySwish.__dict__)
    calls = record(lambda v: branches.LeakySwishBug.apply(v["x"]), {"x": X}, ONES)
    assert "apply" not in branches.LeakySwish.__dict__ and dict(
        branches.LeakySwish.__dict__) == own
    bug = calls[0].returned[0]
    right = record(lambda v: branches.LeakySwish.apply(v["x"]), {"x": X}, ONES)[0].returned[0]
    assert not torch.allclose(bug, right)  # the subclass's own backward ran


def test_apply_is_restored_when_the_forward_raises():
    def forward(v):
        y = branches.RoundSTE.apply(v["x"])
        if len(classes_seen) == 1:
            raise ValueError("second forward fails")
        classes_seen.append(y)
        return y

    classes_seen: list = []
    with pytest.raises(ValueError):
        record(forward, {"x": X}, ONES)
    assert "apply" not in branches.RoundSTE.__dict__


def test_non_tensor_arguments_and_calls_backward_never_reached():
    def forward(v):
        unused = branches.RoundSTE.apply(v["x"])  # noqa: F841 (not on the output's path)
        return branches.scaled_matmul(v["x"].reshape(1, 5), v["w"], 3.0)

    calls = record(forward, {"x": X, "w": torch.ones(5, 2, dtype=torch.float64)},
                   torch.ones(1, 2, dtype=torch.float64))
    (call,) = calls
    assert call.args[2] == 3.0 and len(call.returned) == 2


def test_classes_of_a_model():
    out = culprits.BuggyNet().double()(torch.randn(2, 6, dtype=torch.float64))
    assert classes(out) == [culprits.BuggyLeakyReLU, culprits.Swish]
