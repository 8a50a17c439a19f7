"""The drop-in completes every call torch's gradcheck and gradgradcheck complete, with the
same verdict, whatever the shape of the user's Functions and however the function reaches its
inputs: Functions whose backward calls Functions (itself included), setup_context style,
mark_dirty, once_differentiable, an apply bound early, differentiation inside the forward, a
Parameter assigned to a module, a closure over the checked tensors themselves."""

from __future__ import annotations

import pytest
import torch

from gradscope.testing import gradcheck as dropin
from gradscope.testing.judging import GradcheckError, GradscopeWarning
from gradscope.testing.stats import STATS
from tests.data import function_shapes as fs

RIGHT = ["exp2", "scaled", "doubled", "once", "bound", "energy", "vjp_of_mul"]


def _x(n: int = 4) -> torch.Tensor:
    return torch.randn(n, dtype=torch.float64, generator=torch.Generator().manual_seed(n),
                       requires_grad=True)


def _args(name: str) -> tuple[torch.Tensor, ...]:
    return (_x(), _x(4)) if name == "vjp_of_mul" else (_x(),)


@pytest.mark.parametrize("name", RIGHT)
def test_right_functions_pass_as_torch_passes_them(name):
    fn = getattr(fs, name)
    assert torch.autograd.gradcheck(fn, _args(name))
    assert dropin.gradcheck(fn, _args(name))


@pytest.mark.parametrize("name", [n for n in RIGHT if n not in ("once", "vjp_of_mul")])
def test_twice_differentiable_ones_pass_gradgradcheck(name):
    fn = getattr(fs, name)
    assert torch.autograd.gradgradcheck(fn, _args(name))
    assert dropin.gradgradcheck(fn, _args(name))


def test_a_backward_that_calls_its_own_function_with_a_bug_fails_at_both_orders():
    for check in (dropin.gradcheck, dropin.gradgradcheck):
        with pytest.raises(GradcheckError, match=r"ExpBug\.backward"):
            check(fs.exp_bug, (_x(),))


def test_once_differentiable_fails_gradgradcheck_as_torch_does_and_says_why():
    assert not torch.autograd.gradgradcheck(fs.once, (_x(),), raise_exception=False)
    assert not dropin.gradgradcheck(fs.once, (_x(),), raise_exception=False)
    with pytest.raises(GradcheckError, match=r"Once\.backward is decorated with "
                                             "@once_differentiable"):
        dropin.gradgradcheck(fs.once, (_x(),))


def _parameters() -> tuple[torch.nn.Parameter, torch.Tensor]:
    w = torch.nn.Parameter(torch.randn(3, 3, dtype=torch.float64))
    return w, _x(3)


def test_a_parameter_reaches_the_function_as_a_parameter_with_several_inputs():
    assert torch.autograd.gradcheck(fs.assigns_weight, _parameters())
    before = STATS.passed
    assert dropin.gradcheck(fs.assigns_weight, _parameters())
    assert STATS.passed == before + 1  # (checked by gradscope, not handed to torch)
    assert dropin.gradgradcheck(fs.assigns_weight, _parameters())
    with pytest.raises(GradcheckError, match=r"HalfGrad\.backward"):
        dropin.gradcheck(fs.assigns_weight_bug, _parameters())


def test_a_closure_over_the_checked_tensors_goes_to_torch_whole_never_a_hollow_pass():
    y = _x(3)
    fine = lambda _: y.sin()  # noqa: E731  (reads y itself, not its argument)
    wrong = lambda a: a * fs.HalfGrad.apply(y)  # noqa: E731
    before = STATS.delegated
    assert dropin.gradcheck(fine, (y,))
    assert STATS.delegated == before + 1
    assert "closure" in next(reversed(STATS.reasons))
    assert not dropin.gradcheck(wrong, (y,), raise_exception=False)  # torch fails it too
    assert not torch.autograd.gradcheck(wrong, (y,), raise_exception=False)


def test_a_function_that_leaves_grad_mode_off_is_checked_not_handed_over():
    from tests.data import plainway

    before = (STATS.passed, STATS.delegated)
    try:
        assert dropin.gradcheck(plainway.grad_off, (_x(),))
        assert (STATS.passed, STATS.delegated) == (before[0] + 1, before[1])
        with pytest.raises(GradcheckError, match="mismatch"):
            dropin.gradcheck(plainway.grad_off_bug, (_x(),))
    finally:
        torch.set_grad_enabled(True)


def test_a_hand_over_never_says_no_dependence_where_funcs_first_call_had_one():
    calls = [0]

    def fickle(x):  # differentiable at its first call only
        calls[0] += 1
        return x.sin() if calls[0] == 1 else x.detach().sin()

    dropin.gradcheck(fickle, (_x(),), raise_exception=False)
    why = next(reversed(STATS.reasons))
    assert "does not depend differentiably" not in why and "first call" in why


def _corners() -> torch.Tensor:
    return torch.tensor([0.0, 2.0, 1.0, 3.0, 5.0, 7.0], dtype=torch.float64, requires_grad=True)


@pytest.mark.parametrize("fast", [True, False])
def test_a_function_that_refuses_points_its_check_moves_too_far_passes_as_torch_passes_it(fast):
    from tests.data import vision_shapes as vs

    # fast mode's projection moves every element at once, by more than the function's
    # allclose allows: the shortcut steps aside, the per-element check decides
    assert torch.autograd.gradcheck(vs.cube_volume, (_corners(),), fast_mode=fast)
    assert dropin.gradcheck(vs.cube_volume, (_corners(),), fast_mode=fast)


@pytest.mark.parametrize("fast", [True, False])
def test_such_a_function_with_a_wrong_backward_still_fails_naming_it(fast):
    from tests.data import vision_shapes as vs

    with pytest.raises(GradcheckError, match=r"_VolumeBug\.backward"):
        dropin.gradcheck(vs.cube_volume_bug, (_corners(),), fast_mode=fast)


def _rows() -> torch.Tensor:
    from tests.data.vision_shapes import WIDTH

    return torch.rand(2, WIDTH, generator=torch.Generator().manual_seed(1),
                      dtype=torch.float64, requires_grad=True)


def test_a_gradient_fast_modes_projection_passes_passes_with_what_gradscope_found_said(
        monkeypatch):
    from gradscope.testing import judging
    from tests.data import vision_shapes as vs

    # (the drill-down's cost is priced from one timed evaluation: a cold first call on a
    # loaded machine would skip it, and this test is about what the drill-down says)
    monkeypatch.setattr(judging, "DRILL_BUDGET_S", 1e9)

    called = {"eps": 1e-4, "atol": 1e-4}  # (kornia's HardNet test's)
    assert torch.autograd.gradcheck(vs.detached_norm, (_rows(),), fast_mode=True, **called)
    with pytest.warns(GradscopeWarning, match="fast mode: one random projection") as seen:
        assert dropin.gradcheck(vs.detached_norm, (_rows(),), fast_mode=True, **called)
    assert "mismatching" in str(seen[0].message)
    with pytest.raises(GradcheckError, match="mismatch"):  # strict: gradscope's verdict
        dropin.gradcheck(vs.detached_norm, (_rows(),), fast_mode=True, strict=True, **called)


@pytest.mark.slow
def test_the_same_gradient_fails_where_torch_fails_it_every_element_judged():
    from tests.data import vision_shapes as vs

    called = {"eps": 1e-4, "atol": 1e-4}
    assert not torch.autograd.gradcheck(vs.detached_norm, (_rows(),), raise_exception=False,
                                        **called)
    with pytest.raises(GradcheckError, match="mismatch"):
        dropin.gradcheck(vs.detached_norm, (_rows(),), **called)


@pytest.mark.slow
def test_past_the_drill_budget_torchs_pass_stands_and_the_projections_finding_is_said(
        monkeypatch):
    from gradscope.testing import judging
    from tests.data import vision_shapes as vs

    monkeypatch.setattr(judging, "DRILL_BUDGET_S", 0.0)  # (a conv net's every column: minutes)
    called = {"eps": 1e-4, "atol": 1e-4}
    with pytest.warns(GradscopeWarning, match="the projection vᵀJu over x"):
        assert dropin.gradcheck(vs.detached_norm, (_rows(),), fast_mode=True, **called)
    with pytest.raises(GradcheckError, match="mismatch"):  # strict: every element, always
        dropin.gradcheck(vs.detached_norm, (_rows(),), fast_mode=True, strict=True, **called)
    with pytest.raises(GradcheckError, match="mismatch"):  # slow mode: torch fails it too
        dropin.gradcheck(vs.detached_norm, (_rows(),), **called)
