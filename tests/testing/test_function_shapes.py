"""The drop-in completes every call torch's gradcheck and gradgradcheck complete, with the
same verdict, whatever the shape of the user's Functions and however the function reaches its
inputs: Functions whose backward calls Functions (itself included), setup_context style,
mark_dirty, once_differentiable, an apply bound early, differentiation inside the forward, a
Parameter assigned to a module, a closure over the checked tensors themselves."""

from __future__ import annotations

import pytest
import torch

from gradscope.testing import gradcheck as dropin
from gradscope.testing.judging import GradcheckError
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
