"""forward's parameters read with inspect: names, defaults, annotations that make a number, and
where more positional arguments are taken."""

from __future__ import annotations

import inspect

import torch

from gradscope.targets.signature import OPEN, Param, signature


def test_parameters_their_defaults_and_scalar_annotations():
    def f(x, w: torch.Tensor, n: int, scale: float = 2.0, *, flag: bool = False):
        return x

    params = signature(f, 0, "f")
    assert [p.name for p in params] == ["x", "w", "n", "scale", "flag"]
    assert [p.scalar for p in params] == [None, None, "int", "float", "bool"]
    assert params[3].default == 2.0 and params[0].default is inspect.Parameter.empty
    assert params[4].keyword and not params[0].keyword


def test_ctx_or_self_skipped_and_open_ends():
    def forward(ctx, x, *rest, **options):
        return x

    assert signature(forward, 1, "F") == [Param("x"), OPEN]
    assert signature(torch.sigmoid, 0, "torch.sigmoid") == [OPEN]  # unreadable builtin
    assert Param("n", annotation="int").scalar == "int"  # a string annotation
