"""`gradscope.surrogate`: the marker users put in their code, bare or with a reason, and what
counts as a declaration."""

from __future__ import annotations

import pytest
import torch

import gradscope
from gradscope.markers import DEFAULT_REASON, MARKER, marker_of, reference_of


def test_bare_and_with_a_reason():
    @gradscope.surrogate
    def bare(x):
        return x

    @gradscope.surrogate("straight-through estimator")
    def reasoned(x):
        return x

    assert marker_of(bare) == DEFAULT_REASON
    assert marker_of(reasoned) == "straight-through estimator"
    assert getattr(reasoned, MARKER) == "straight-through estimator"


def test_what_declares_and_what_does_not():
    class Plain:
        pass

    class Own:
        __gradscope_surrogate__ = True  # set without importing gradscope

    class Off:
        __gradscope_surrogate__ = False

    assert marker_of(Plain) is None and marker_of(None) is None and marker_of(Off) is None
    assert marker_of(Own) == DEFAULT_REASON


def test_an_intended_form_as_reference():
    @gradscope.surrogate("gated", reference=torch.nn.functional.hardtanh)
    class Gated(torch.autograd.Function):
        pass

    @gradscope.surrogate(reference=lambda x: x)
    class Layer(torch.nn.Module):
        pass

    assert reference_of(Gated) is torch.nn.functional.hardtanh
    # on a class, never bound to an instance as a method
    assert reference_of(Layer())(torch.ones(1)).item() == 1.0
    assert reference_of(gradscope.surrogate(lambda x: x)) is None  # a marker without one

    class Undeclared:
        __gradscope_surrogate_reference__ = staticmethod(abs)  # no marker: nothing declared

    assert reference_of(Undeclared) is None
    with pytest.raises(TypeError, match="takes a function"):
        gradscope.surrogate(reference=3)(Undeclared)
