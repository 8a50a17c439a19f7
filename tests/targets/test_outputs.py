"""Which output is differentiated: the tensor itself, or the one picked from a tuple, a dict or
a model-output object; anything else said, with how to pick."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from gradscope.errors import UsageError
from gradscope.targets.outputs import picked

T = torch.ones(2)


def test_a_tensor_is_itself_and_a_pick_finds_the_one_asked_for():
    assert picked(T, "f", None) is T
    assert picked((T, T * 2), "f", 1)[0] == 2 and picked((T, T * 2), "f", -2) is T
    assert picked({"loss": T, "logits": T * 3}, "f", "loss") is T
    assert picked(SimpleNamespace(loss=T * 5), "f", "loss")[0] == 5


@pytest.mark.parametrize("out, choice, message", [
    ((T, T), None, r"returned a tuple of 2; pick the output to check with --output-index N"),
    ({"a": T}, None, r"returned a dict with keys a; pick one with --output-key KEY"),
    ((T, T), 2, r"--output-index 2: f returned 2 outputs"),
    ({"a": T}, "b", r"returned a dict with keys a; --output-key b picks none of them"),
    (3.0, None, r"returned float, not a tensor"),
])
def test_what_cannot_be_picked_is_said(out, choice, message):
    with pytest.raises(UsageError, match=message):
        picked(out, "f", choice)
