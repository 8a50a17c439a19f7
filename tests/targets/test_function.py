"""A torch.autograd.Function as a target: called through apply, inputs named after forward's
parameters, non-tensor ones from --arg."""

from __future__ import annotations

import textwrap

import pytest

import gradscope
from gradscope.errors import TargetError
from gradscope.targets import resolve
from tests.paths import SEEDS


def test_function_inputs_and_args():
    t = resolve(f"{SEEDS}:KillHead", args={"n": 2})
    assert t.kind == "autograd_function" and t.names == ("input",)


def test_backward_raising_is_exit_3(tmp_path):
    path = tmp_path / "bwd.py"
    path.write_text(textwrap.dedent("""
        import torch
        class F(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2
            @staticmethod
            def backward(ctx, g):
                raise RuntimeError("my backward is broken")
    """))
    with pytest.raises(TargetError, match="my backward is broken"):
        gradscope.check(f"{path}:F")
