"""`gradscope.surrogate`: the marker users put in their code, bare or with a reason, and what
counts as a declaration."""

from __future__ import annotations

import gradscope
from gradscope.markers import DEFAULT_REASON, MARKER, marker_of


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
