"""A custom backward must be linear in the gradient it is given: the in-place check names the
Function that writes a constant where a multiple of grad_output belonged (a flat forward's
elements hide it from finite differences), and never a linear, a random or a refusing one."""

from __future__ import annotations

import torch

import gradscope
from gradscope.compare.tolerance import Tolerance
from gradscope.features.inplace.calls import joined
from gradscope.features.inplace.linearity import nonlinear
from tests.data import seed_layers
from tests.paths import DATA

TOL = Tolerance.for_dtype("float64")
X = (torch.linspace(-1, 2, 13, dtype=torch.float64),)


def _check(cls, args=X):
    return nonlinear(cls, args, {}, ["x"], joined, TOL, 0)


class Scaled(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clamp(0, 1)

    @staticmethod
    def backward(ctx, g):
        return 3 * g  # wrong, but linear: finite differences' business, not this check's


class Noisy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1.0

    @staticmethod
    def backward(ctx, g):
        return g + torch.rand_like(g)  # random: two identical calls differ


class Refuses(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        if x.dtype == torch.float64:
            raise TypeError("float32 only")
        return x


def test_the_seeds_clamp_writing_one_is_not_linear():
    found = _check(seed_layers.ClampGradient)
    assert found is not None and found.argument == "x"
    assert found.count == int((X[0] > 1).sum())  # exactly where it writes the 1


def test_linear_random_and_refusing_backwards_are_left_alone():
    assert _check(seed_layers.RoundGradient) is None  # a surrogate, and linear
    assert _check(Scaled) is None
    assert _check(Noisy) is None
    assert _check(Refuses) is None


def test_the_check_and_the_graph_name_the_clamp_in_a_function_using_both():
    report = gradscope.check(f"{DATA}/seed_layers.py:combo")
    culprit = [d for d in report.diagnostics if d.kind == "culprit"]
    assert not report.passed and len(culprit) == 1
    assert culprit[0].message.startswith("ClampGradient.backward (seed_layers.py:25)")
    assert "not linear in grad_output" in culprit[0].message
    graph = gradscope.graph(f"{DATA}/seed_layers.py:combo")
    wrong = [n.name for n in graph.nodes if n.status == "wrong"]
    assert wrong == ["ClampGradientBackward"]
    assert any(d.kind == "culprit" for d in graph.diagnostics)
