"""Recording each custom Function call: its arguments, the gradient it received and what its
backward returned, however `apply` is reached; the class restored afterwards, subclasses still
running their own code."""

from __future__ import annotations

import pytest
import torch

from gradscope.features.inplace.calls import classes, record
from tests.data import branches, culprits

X = torch.linspace(-2, 2, 5, dtype=torch.float64)
ONES = torch.ones(5, dtype=torch.float64)


def test_calls_record_arguments_and_both_gradients():
    def forward(v):
        return branches.LeakySwishBug.apply(2 * branches.LeakySwish.apply(v["x"]))

    first, second = record(forward, {"x": X}, ONES).calls
    assert (first.cls, second.cls) == (branches.LeakySwish, branches.LeakySwishBug)
    assert torch.equal(first.args[0], X)
    assert torch.allclose(first.received[0], 2 * second.returned[0])  # through the 2·
    assert torch.equal(second.received[0], ONES)


def test_the_class_is_restored_and_subclasses_run_their_own_backward():
    own = dict(branches.LeakySwish.__dict__)
    sub = dict(branches.LeakySwishBug.__dict__)
    calls = record(lambda v: branches.LeakySwishBug.apply(v["x"]), {"x": X}, ONES).calls
    assert dict(branches.LeakySwish.__dict__) == own
    assert dict(branches.LeakySwishBug.__dict__) == sub
    bug = calls[0].returned[0]
    right = record(lambda v: branches.LeakySwish.apply(v["x"]), {"x": X}, ONES).calls[0].returned[0]
    assert not torch.allclose(bug, right)  # the subclass's own backward ran


def test_an_apply_bound_before_the_check_is_recorded_once_per_call():
    from tests.data.zoo_conv import ClampedReLU

    relu = ClampedReLU.apply  # bound at import time, as `self.relu = MyReLU.apply` is
    calls = record(lambda v: relu(relu(v["x"]) - 1), {"x": X}, ONES).calls
    assert [c.cls for c in calls] == [ClampedReLU, ClampedReLU]
    assert torch.equal(calls[0].args[0], X) and torch.equal(calls[1].args[0], X.clamp(min=0) - 1)
    assert "forward" in vars(ClampedReLU) and "setup_context" not in vars(ClampedReLU)


def test_a_functorch_style_class_is_recorded_through_setup_context():
    from tests.data.stack import TypoGELU

    gelu = TypoGELU.apply
    (call,) = record(lambda v: gelu(v["x"]), {"x": X}, ONES).calls
    assert call.cls is TypoGELU and torch.equal(call.args[0], X)
    assert torch.equal(call.received[0], ONES)


def test_the_class_is_restored_when_the_forward_raises():
    def forward(v):
        y = branches.RoundSTE.apply(v["x"])
        if len(classes_seen) == 1:
            raise ValueError("second forward fails")
        classes_seen.append(y)
        return y

    classes_seen: list = []
    with pytest.raises(ValueError):
        record(forward, {"x": X}, ONES)
    assert "setup_context" not in branches.RoundSTE.__dict__
    assert branches.RoundSTE.forward is vars(branches.RoundSTE)["forward"].__func__


def test_non_tensor_arguments_and_calls_backward_never_reached():
    def forward(v):
        unused = branches.RoundSTE.apply(v["x"])  # noqa: F841 (not on the output's path)
        return branches.scaled_matmul(v["x"].reshape(1, 5), v["w"], 3.0)

    calls = record(forward, {"x": X, "w": torch.ones(5, 2, dtype=torch.float64)},
                   torch.ones(1, 2, dtype=torch.float64)).calls
    (call,) = calls
    assert call.args[2] == 3.0 and len(call.returned) == 2


def test_classes_of_a_model():
    out = culprits.BuggyNet().double()(torch.randn(2, 6, dtype=torch.float64))
    assert classes(out) == [culprits.BuggyLeakyReLU, culprits.Swish]


def test_gradient_hooks_of_the_forward_are_recorded_with_what_they_were_given():
    def forward(v):
        h = v["x"] * 3
        h.register_hook(lambda g: g * 0.5)  # changes it
        k = h.exp()
        k.register_hook(lambda g: None)  # only looks
        return k.sum()

    recorded = record(forward, {"x": X}, torch.ones((), dtype=torch.float64))
    assert recorded.calls == []
    halve, look = sorted(recorded.hooks, key=lambda h: h.returned is None)
    assert halve.where == look.where.replace(str(int(look.where.split(":")[1])),
                                             str(int(look.where.split(":")[1]) - 2))
    assert halve.where.startswith("test_calls.py:")
    assert torch.allclose(halve.returned, 0.5 * halve.received)
    assert torch.allclose(halve.received, (3 * X).exp())
    assert look.returned is None


def test_no_hook_and_no_function_costs_one_forward_only():
    seen = []

    def forward(v):
        seen.append(1)
        return (v["x"] ** 2).sum()

    recorded = record(forward, {"x": X}, torch.ones((), dtype=torch.float64))
    assert recorded.calls == [] and recorded.hooks == [] and len(seen) == 1


def test_returns_are_not_watched_while_the_user_profiles():
    import sys

    from gradscope.features.inplace.calls import FunctionCall, returns_seen

    class Twice(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = torch.ones(2, requires_grad=True)
    y = Twice.apply(x)
    call = FunctionCall(Twice, (x,), {}, y.grad_fn)
    mine = lambda frame, event, arg: None  # noqa: E731 — the user's own profiler
    sys.setprofile(mine)
    try:
        with returns_seen([call]):
            torch.autograd.grad(y.sum(), x)
        assert sys.getprofile() is mine and "returned_at" not in call.extra
    finally:
        sys.setprofile(None)
    y = Twice.apply(x)
    call = FunctionCall(Twice, (x,), {}, y.grad_fn)
    with returns_seen([call]):
        torch.autograd.grad(y.sum(), x)
    assert call.extra["returned_at"] > 0 and sys.getprofile() is None


def _cpp_ops():
    """tests/data/cpp_ops.py, built on first import (skipped where nothing can compile it:
    no compiler, ninja or setuptools, or a build that fails for want of headers)."""
    import shutil

    try:
        from torch.utils.cpp_extension import is_ninja_available
    except ImportError as exc:  # (setuptools)
        pytest.skip(f"torch's extension builder cannot be imported here: {exc}")
    if shutil.which("c++") is None or not is_ninja_available():
        pytest.skip("no C++ compiler or ninja here to build the test extension")
    try:
        from tests.data import cpp_ops
    except (RuntimeError, OSError, ImportError) as exc:  # (the build itself failed)
        pytest.skip(f"the test extension did not build here: {str(exc)[:200]}")
    return cpp_ops


@pytest.mark.slow
def test_a_dispatcher_ops_calls_are_recorded_with_their_kernels_gradient():
    cpp_ops = _cpp_ops()
    (call,) = record(lambda v: cpp_ops.uses_wrong(v["x"]), {"x": X}, ONES).calls
    assert call.cls.dispatcher_op._schema.name == "gradscope_cpp::scaled_sin_bug"
    assert torch.equal(call.args[0], X) and call.args[1] == 2.0
    assert torch.allclose(call.received[0], ONES * X)  # (d(y·x)/dy)
    # what the C++ kernel returns for it: 1.5 × the derivative, as its backward is written
    assert torch.allclose(call.returned[0], 1.5 * 2 * X.cos() * X)
    assert call.returned[1] is None  # (a float argument)


def test_torchs_own_ops_and_custom_ops_functions_are_not_dispatcher_calls():
    from tests.data import custom_ops

    def forward(v):
        return torch.ops.aten.sin(v["x"]) * custom_ops.sine(v["x"])

    calls = record(forward, {"x": X}, ONES).calls
    # (the custom op's generated Function is recorded once, as a Function)
    assert [getattr(c.cls, "dispatcher_op", None) for c in calls] == [None]


def test_a_function_inside_vmap_is_recorded_as_the_users_class_on_the_batched_tensors():
    from tests.data import vmapped

    x = torch.linspace(-1, 1, 12, dtype=torch.float64).reshape(3, 4)
    (call,) = record(lambda v: vmapped.row_norms_bug(v["x"]), {"x": x},
                     torch.ones(3, dtype=torch.float64)).calls
    assert call.cls.__name__ == "RootBug" and call.cls.vmapped is vmapped.RootBug
    assert torch.allclose(call.args[0], (x * x).sum(1) + 1)  # the three rows' sums at once
    assert torch.allclose(call.returned[0], 1 / call.args[0].sqrt())  # the wrong g / y
    # applied again, the class vmaps the user's Function over the batched tensor
    assert torch.allclose(call.cls.apply(call.args[0]), call.args[0].sqrt())


def test_nested_vmaps_record_the_outermost_call_only():
    from tests.data import vmapped

    x = torch.linspace(-1, 1, 12, dtype=torch.float64).reshape(3, 4)
    (call,) = record(lambda v: vmapped.nested_bug(v["x"]), {"x": x},
                     torch.ones(3, 4, dtype=torch.float64)).calls
    assert call.cls.vmapped is vmapped.RootBug and call.args[0].shape == (3, 4)
    assert torch.allclose(call.cls.apply(call.args[0]), call.args[0].sqrt())


def test_vmapped_calls_are_not_recorded_while_the_user_profiles():
    import sys

    from tests.data import vmapped

    x = torch.ones(2, 3, dtype=torch.float64)
    sys.setprofile(lambda *_: None)
    try:
        calls = record(lambda v: vmapped.row_norms_bug(v["x"]), {"x": x},
                       torch.ones(2, dtype=torch.float64)).calls
    finally:
        sys.setprofile(None)
    assert calls == []


def test_an_input_whose_one_way_into_the_graph_is_a_call_is_that_calls_alone():
    def alone(v):
        return branches.LeakySwish.apply(v["x"]).sum() + (v["y"] * 2).sum()

    def shared(v):
        return branches.LeakySwish.apply(v["x"]).sum() + v["x"].sum()

    (call,) = record(alone, {"x": X, "y": X.clone()}, torch.ones(())).calls
    assert call.extra["sole"] == {0: "x"}
    (call,) = record(shared, {"x": X}, torch.ones(())).calls
    assert "sole" not in call.extra  # (a second way in: its gradient is not the call's alone)
