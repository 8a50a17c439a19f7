"""Where gradscope's own shortcuts do not fit real-shaped code — a forward that registers a
hook or uses torch.func.vmap, one that leaves grad mode off, a stateful module — the check goes
the plain way with a note and gives the verdict torch's gradcheck gives: a pass for the right
code, a failure for its twin with a bug. What torch cannot differentiate is exit 2 with the way
on, never an internal error."""

from __future__ import annotations

import pytest
import torch

import gradscope
from gradscope.errors import UsageError
from tests.data import plainway
from tests.paths import DATA

PLAIN = f"{DATA}/plainway.py"


@pytest.mark.parametrize("name, says", [
    ("hooked", "finite differences evaluate the target the plain way"),
    ("uses_vmap", None),  # (the watched forward leaves what it cannot read in vmap alone)
    ("grad_off", "leaves grad mode off"),
    ("Leaky", "keeps state between calls"),
])
def test_right_code_passes_the_plain_way_and_says_so(name, says):
    report = gradscope.check(f"{PLAIN}:{name}", at={"x": "randn(4,3)"})
    assert report.passed, report.to_text()
    assert all(set(i.status_counts) == {"ok"} for i in report.inputs)
    if says is None:
        assert not any("stepped aside" in n for n in report.notes), report.notes
    else:
        assert any(says in n for n in report.notes), report.notes
    assert torch.is_grad_enabled()  # (restored after the target's calls)
    fn = getattr(plainway, name)
    if isinstance(fn, type):
        return  # (torch's own gradcheck measures a stateful module's drift: it fails there)
    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    with torch.enable_grad():  # (grad_off leaves it off under torch's own call too)
        assert torch.autograd.gradcheck(fn, (x,))  # torch agrees


@pytest.mark.parametrize("name", ["hooked_bug", "uses_vmap_bug", "grad_off_bug", "LeakyBug"])
def test_its_twin_with_a_bug_fails(name):
    report = gradscope.check(f"{PLAIN}:{name}", at={"x": "randn(4,3)"})
    assert not report.passed and report.inputs[0].status == "mismatch"


def test_reentrant_checkpointing_is_exit_2_with_the_way_on():
    with pytest.raises(UsageError, match="use_reentrant=False"):
        gradscope.check(f"{PLAIN}:reentrant", at={"x": "randn(4)"})
    assert gradscope.check(f"{PLAIN}:nonreentrant", at={"x": "randn(4)"}).passed


def test_what_a_forward_keeps_for_its_backward_is_still_there_when_backward_runs():
    module = plainway.KeepsForBackward()
    report = gradscope.check(module, torch.randn(5, dtype=torch.float64))
    assert report.passed, report.to_text()
    assert not hasattr(module, "kept")  # (and the module is left as it was found)


def test_order_2_through_a_once_differentiable_backward_is_exit_2_with_the_way_on():
    with pytest.raises(UsageError, match=r"Once.backward \(function_shapes.py:\d+\) is "
                                         "decorated with @once_differentiable.*check order 1"):
        gradscope.check(f"{DATA}/function_shapes.py:once", at={"x": "randn(4)"}, order=2)
    assert gradscope.check(f"{DATA}/function_shapes.py:exp2", at={"x": "randn(4)"},
                           order=2).passed


SHAPES = f"{DATA}/function_shapes.py"


@pytest.mark.parametrize("target, at", [
    (f"{PLAIN}:hooked", {"x": "randn(4,3)"}), (f"{PLAIN}:hooked_bug", {"x": "randn(4,3)"}),
    (f"{PLAIN}:Leaky", {"x": "randn(4,3)"}), (f"{PLAIN}:LeakyBug", {"x": "randn(4,3)"}),
    (f"{SHAPES}:exp2", {"x": "randn(5)"}), (f"{SHAPES}:exp_bug", {"x": "randn(5)"}),
    (f"{SHAPES}:vjp_of_mul", {"a": "randn(3)", "b": "randn(3)"}),
    (f"{SHAPES}:through_two_names", {"x": "randn(3)"}),
])
def test_the_plain_way_asked_for_gives_the_verdict_the_shortcuts_give(target, at):
    fast = gradscope.check(target, at=at)
    plain = gradscope.check(target, at=at, plain=True)
    assert plain.passed == fast.passed
    assert [(i.name, i.status, i.status_counts) for i in plain.inputs] == \
        [(i.name, i.status, i.status_counts) for i in fast.inputs]
    assert any(n.startswith("--plain") for n in plain.notes), plain.notes
