"""Surrogates: what they look like, where declarations come from (markers read from the
autograd graph, --surrogate), and the marker decorator."""

from __future__ import annotations

import torch

import gradscope
from gradscope.explain.surrogates import declared, marked_inputs, shape_of
from gradscope.markers import MARKER, marker_of
from gradscope.options import ANY_INPUT, SurrogateDeclaration
from tests.data.corpus import RoundSTE
from tests.paths import DATA

X = torch.linspace(-3, 3, 13, dtype=torch.float64)


def test_shapes_identity_scaled_gated_bump_and_varying():
    everywhere = torch.ones(13, dtype=torch.bool)
    assert shape_of(torch.ones(13), X, everywhere, None).startswith("identity")
    assert shape_of(torch.full((13,), 0.5), X, everywhere, None).startswith(
        "straight-through scaled by 0.5")
    inside = X.abs() <= 1
    gated = torch.where(inside, 1.0, 0.0)
    text = shape_of(gated, X, inside, everywhere)
    assert text.startswith("identity") and "0 at every value at hand outside [-1, 1]" in text
    # the gate the coarse-scale sweep placed, where there is one, instead of the values at hand
    assert shape_of(gated, X, inside, everywhere, ", gated to [−1, 1]").endswith(
        ", gated to [−1, 1]")
    bump = 1 / (1 + 4 * X.abs()) ** 2
    assert "smooth bump" in shape_of(bump, X, everywhere, None)
    wiggle = torch.sin(5 * X)
    assert shape_of(wiggle, X, everywhere, None).startswith("it varies")


class _Marked(RoundSTE):  # the corpus's straight-through round, with the marker
    __gradscope_surrogate__ = "straight-through"


def test_marked_functions_declare_only_the_inputs_behind_them():
    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    y = torch.randn(3, dtype=torch.float64, requires_grad=True)
    out = _Marked.apply(x) * 2 + y.exp()
    assert marked_inputs(out, {"x": x, "y": y}) == {"x": "_Marked: straight-through"}
    assert marked_inputs(y.exp(), {"x": x, "y": y}) == {}


def test_declared_merges_option_target_marker_and_graph():
    names, none = ("x", "y"), SurrogateDeclaration()
    assert declared(none, names, None, {"x": "F: why"}) == {"x": "F: why"}
    assert set(declared(SurrogateDeclaration((ANY_INPUT,)), names, None, {})) == {"x", "y"}
    assert declared(SurrogateDeclaration(("y",)), names, None, {}) == {
        "y": "declared with --surrogate"}
    assert declared(SurrogateDeclaration(("y",), {"y": "y**2"}), names, None, {}) == {
        "y": "declared with --surrogate y=y**2"}
    assert set(declared(none, names, "in code", {})) == {"x", "y"}


def test_the_decorator_sets_the_marker_bare_or_with_a_reason():
    @gradscope.surrogate
    def f(x):
        return x

    @gradscope.surrogate("PACT")
    class G:
        pass

    assert getattr(f, MARKER) == "declared in code" and marker_of(G) == "PACT"
    assert marker_of(object()) is None

    class Off:
        __gradscope_surrogate__ = False

    assert marker_of(Off) is None


DECLARED = f"{DATA}/declared.py"


def test_decorated_targets_pass_with_the_relation_named():
    report = gradscope.check(f"{DECLARED}:ScaledIdentity")
    assert report.passed and report.inputs[0].status == "surrogate"
    (diagnostic,) = [d for d in report.diagnostics if d.kind == "surrogate_gradient"]
    assert "PACT-style" in diagnostic.message and "0.25 × the derivative" in diagnostic.message
    assert gradscope.check(f"{DECLARED}:clipped").passed  # bare decorator on a function


def test_a_declaration_that_is_not_needed_is_a_note():
    report = gradscope.check(f"{DECLARED}:Exact")
    assert report.passed and report.inputs[0].status == "ok"
    assert any("declaration is not needed" in n for n in report.notes)


def test_a_declared_surrogate_still_gets_every_other_check():
    report = gradscope.check(f"{DECLARED}:NotLinear", surrogate=True)
    assert not report.passed
    assert any(d.kind == "nonlinear_backward" for d in report.diagnostics)
