"""Old-style custom Functions (ctx in forward) evaluated through their forward for finite
differences: batched with vmap, the same values as the per-column loop, restored after."""

from __future__ import annotations

import pytest
import torch

import gradscope
from gradscope.targets.code import CodeTarget
from gradscope.targets.oldstyle import _Ctx, old_style, own_static, values_only
from tests.data.classmethods import ClassSoftmax, ClassSoftmaxBug
from tests.data.models import Scaled, UsesScaled
from tests.data.stack import OldTypoGELU, TypoGELU
from tests.paths import DATA, ROOT

STACK = ROOT / "tests" / "data" / "stack.py"


def test_only_old_style_functions_in_the_graph_are_found():
    x = torch.randn(3, requires_grad=True)
    out = Scaled.apply(x) + TypoGELU.apply(x)  # TypoGELU has setup_context: vmap takes it
    found = old_style(out)  # by name: copies of the file loaded by other tests count too
    assert Scaled in found and {c.__name__ for c in found} == {"Scaled"}
    assert old_style(torch.tanh(x)) == []


def test_values_only_runs_forward_and_restores_the_class():
    x = torch.randn(4)
    own = dict(vars(Scaled))
    with values_only([Scaled]):
        assert vars(Scaled)["forward"] is not own["forward"]
        batched = torch.func.vmap(lambda v: Scaled.apply(v))(torch.stack([x, 2 * x]))
    assert dict(vars(Scaled)) == own
    assert torch.equal(batched, torch.stack([2 * x, 4 * x]))
    y = torch.randn(2, requires_grad=True)
    Scaled.apply(y).sum().backward()  # the real Function again
    assert torch.equal(y.grad, torch.full((2,), 2.0))
    try:
        torch.func.vmap(Scaled.apply)(torch.stack([x, 2 * x]))
    except RuntimeError as exc:  # vmap refuses the old-style class again
        assert "setup_context" in str(exc)
    else:
        raise AssertionError("vmap took an old-style Function after the patch was undone")


def test_an_apply_bound_before_the_check_is_batched_too():
    bound = Scaled.apply  # as `relu = MyReLU.apply` is written at import time
    x = torch.randn(3)
    with values_only([Scaled]):
        batched = torch.func.vmap(bound)(torch.stack([x, -x]))
    assert torch.equal(batched, torch.stack([2 * x, -2 * x]))


def test_the_same_estimates_as_the_per_column_loop(monkeypatch):
    torch.manual_seed(0)
    x, net = torch.randn(3, 4), UsesScaled()
    batched = gradscope.check(net, x)
    monkeypatch.setattr(CodeTarget, "for_values", lambda self, output: (self.traced, []))
    looped = gradscope.check(net, x)
    assert batched.passed and looped.passed
    for a, b in zip(batched.inputs, looped.inputs, strict=True):
        assert a.name == b.name
        assert torch.allclose(torch.tensor(a.finite_difference),
                              torch.tensor(b.finite_difference), rtol=1e-9, atol=1e-12)
    assert any("evaluate Scaled" in n for n in batched.notes)


def test_an_old_style_typo_is_found_as_in_the_functorch_style():
    report = gradscope.check(f"{STACK}:small_old_typo_loss", at={"x": "randn(2,4,16)"})
    names = [i.name for i in report.inputs]
    failing = {i.name for i in report.inputs if i.status == "mismatch"}
    assert failing == set(names[:names.index("small_old_typo.blocks.1.fc2.weight")])
    assert "setup_context" not in vars(OldTypoGELU)


def test_a_subclass_that_overrides_only_backward_is_found_and_runs_its_parents_forward():
    from tests.data.corpus import SwishMissingTerm

    x = torch.randn(5, requires_grad=True)
    assert SwishMissingTerm in old_style(SwishMissingTerm.apply(x).sum())
    with values_only([SwishMissingTerm]):
        batched = torch.func.vmap(SwishMissingTerm.apply)(torch.stack([x.detach()] * 2))
    assert torch.allclose(batched[0], x.detach() * torch.sigmoid(x.detach()))
    assert "forward" not in vars(SwishMissingTerm)


CLASSMETHODS = f"{DATA}/classmethods.py"


def test_a_classmethod_function_is_called_as_apply_calls_it():
    # (forward(cls, ctx, ...): a stand-in that dropped `cls` passed ctx as x)
    x = torch.randn(2, 3, dtype=torch.float64)
    forward = own_static(ClassSoftmaxBug, "forward")  # (inherited, bound to the subclass)
    assert torch.allclose(forward(_Ctx((x,)), x, -1), torch.softmax(x, -1))
    assert own_static(ClassSoftmax, "backward").__self__ is ClassSoftmax


@pytest.mark.parametrize("target", ["ClassSoftmax", "softmax"])
def test_classmethod_functions_are_checked_right_and_wrong(target):
    right = gradscope.check(f"{CLASSMETHODS}:{target}", at={"x": "randn(3,5)"})
    assert right.passed and right.inputs[0].status_counts == {"ok": 15}
    buggy = "ClassSoftmaxBug" if target == "ClassSoftmax" else "softmax_bug"
    wrong = gradscope.check(f"{CLASSMETHODS}:{buggy}", at={"x": "randn(3,5)"})
    assert not wrong.passed and wrong.inputs[0].status == "mismatch"


def _made_per_call():
    """A Function class made afresh at every call, as fast-soft-sort's wrap_class does."""

    class PerCall(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    return PerCall


def test_only_the_classes_in_the_graph_are_stood_in_for_not_their_namesakes():
    kept = [_made_per_call() for _ in range(50)]  # (classes of earlier calls, still alive)
    used = _made_per_call()
    out = used.apply(torch.ones(3, requires_grad=True))
    assert old_style(out) == [used]
    assert len({cls.__name__ for cls in kept}) == 1
