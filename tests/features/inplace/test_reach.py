"""Whether a departing Function reaches the target: the departure known at every element
(full finite differences, or autograd of the Function's own forward proven against them), and
the target's gradient moved by it — beyond the tolerance where the Function is used as it is,
not where the target symmetrises what the Function departs in."""

from __future__ import annotations

import torch

from gradscope.compare.tolerance import Tolerance
from gradscope.explain.relations import Arrays
from gradscope.features.inplace import reach
from gradscope.features.inplace.calls import FunctionCall
from gradscope.features.inplace.culprits import ClassCheck, Wrong
from gradscope.report.status import Status

TOL = Tolerance(1e-7, 1e-9)
OK, MISMATCH, UNCHECKED = Status.OK.code, Status.MISMATCH.code, Status.UNCHECKED.code


class Scaled(torch.autograd.Function):
    """x·w whose backward gives x 1.5× its gradient."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return 1.5 * g * w, g * x


class Opaque(Scaled):
    """The same forward, computed where autograd cannot follow."""

    @staticmethod
    def forward(ctx, x, w):
        return torch.from_numpy(x.detach().numpy() * w.detach().numpy())


class Wrapping(Scaled):
    """The same forward through another custom Function (its backward would answer)."""

    @staticmethod
    def forward(ctx, x, w):
        return Scaled.apply(x, w)


def _arrays(x, w, g, status):
    got = 1.5 * g * w
    right = g * w
    return Arrays(got, torch.where(status == UNCHECKED, torch.nan, right),
                  torch.full_like(got, 1e-12), status)


def _half_sampled(n):
    status = torch.full((n,), MISMATCH)
    status[::2] = UNCHECKED
    return status


def _call(cls, x, w):
    return FunctionCall(cls, (x, w), {}, None)


def test_a_sampled_comparison_is_completed_by_autograd_of_the_forward_it_agrees_with():
    x, w, g = torch.randn(6, dtype=torch.float64), torch.randn(6, dtype=torch.float64), \
        torch.randn(6, dtype=torch.float64)
    arrays = _arrays(x, w, g, _half_sampled(6))
    found = reach.departure(_call(Scaled, x, w), ["x", "w"], {"x": x}, g, {"x": arrays}, TOL)
    assert found is not None
    # every element, the unchecked ones too: derivative − backward = −0.5·g·w
    torch.testing.assert_close(found["x"], -0.5 * g * w)


def test_a_forward_autograd_cannot_follow_or_that_calls_a_custom_function_proves_nothing():
    x, w, g = (torch.randn(6, dtype=torch.float64) for _ in range(3))
    arrays = _arrays(x, w, g, _half_sampled(6))
    for cls in (Opaque, Wrapping):
        assert reach.departure(_call(cls, x, w), ["x", "w"], {"x": x}, g, {"x": arrays},
                               TOL) is None, cls
        # compared at every element, the finite differences are the departure themselves
        full = _arrays(x, w, g, torch.full((6,), MISMATCH))
        found = reach.departure(_call(cls, x, w), ["x", "w"], {"x": x}, g, {"x": full}, TOL)
        torch.testing.assert_close(found["x"], -0.5 * g * w)


def test_autograd_of_a_forward_that_disagrees_with_the_differences_is_never_trusted():
    # the reference says the derivative is 3·g·w: autograd of the forward (g·w) is refused
    x, w, g = (torch.randn(6, dtype=torch.float64) for _ in range(3))
    status = _half_sampled(6)
    arrays = Arrays(1.5 * g * w, torch.where(status == UNCHECKED, torch.nan, 3 * g * w),
                    torch.full_like(x, 1e-12), status)
    assert reach.departure(_call(Scaled, x, w), ["x", "w"], {"x": x}, g, {"x": arrays},
                           TOL) is None


def test_elements_that_agree_depart_in_nothing():
    x, w, g = (torch.randn(4, dtype=torch.float64) for _ in range(3))
    agreeing = Arrays(g * w, g * w, torch.zeros(4, dtype=torch.float64),
                      torch.full((4,), OK))
    found = reach.departure(_call(Scaled, x, w), ["x", "w"], {"x": x}, g, {"x": agreeing},
                            TOL)
    assert found is not None and not bool(found["x"].any())


def _check(cls, departure, x, w):
    call = _call(cls, x.detach().clone(), w.detach().clone())
    wrong = Wrong(call, "x", None, 4, index=0, names=("x", "w"), departure=departure)
    return ClassCheck(cls, 1, 8, (wrong,))


def _grads(forward, values):
    leaves = {n: v.detach().requires_grad_(True) for n, v in values.items()}
    out = forward(leaves)
    return dict(zip(leaves, torch.autograd.grad(out, list(leaves.values())), strict=True))


def test_a_departure_used_as_it_is_moves_the_target_and_one_symmetrised_away_does_not():
    m = torch.randn(3, 3, dtype=torch.float64)
    w = torch.ones(3, 3, dtype=torch.float64)

    def direct(v):
        return Scaled.apply(v["m"], w).sum()

    def symmetrised(v):
        return Scaled.apply(v["m"] + v["m"].mT, w).sum()

    # a departure antisymmetric in m's argument: the symmetrising sum cancels it
    skew = torch.randn(3, 3, dtype=torch.float64)
    skew = skew - skew.mT
    values = {"m": m}
    kept = reach.moved(symmetrised, values, [_check(Scaled, {"x": skew}, m + m.mT, w)],
                       _grads(symmetrised, values), TOL)
    assert kept.unproven is None and not kept.reaches and kept.worst < 1
    moved = reach.moved(direct, values, [_check(Scaled, {"x": skew}, m, w)],
                        _grads(direct, values), TOL)
    assert moved.reaches and moved.moved == {"m": 6} and moved.worst > 1e6


def test_what_is_not_known_everywhere_or_not_repeated_is_not_proven():
    m, w = torch.randn(4, dtype=torch.float64), torch.ones(4, dtype=torch.float64)

    def direct(v):
        return Scaled.apply(v["m"], w).sum()

    values = {"m": m}
    grads = _grads(direct, values)
    unknown = reach.moved(direct, values, [_check(Scaled, None, m, w)], grads, TOL)
    assert unknown.unproven and not unknown.reaches
    # the second forward gives the call other arguments (the recorded ones are stale)
    stale = reach.moved(direct, values, [_check(Scaled, {"x": torch.ones(4)}, m + 1, w)],
                        grads, TOL)
    assert stale.unproven == "a second forward gave it other arguments"


def test_a_second_forward_that_raises_leaves_the_note_unproven_and_the_culprit_named(
        monkeypatch):
    import gradscope
    from tests.paths import DATA

    def refused(*_args, **_kwargs):
        raise RuntimeError("the user's code refuses a third call")

    monkeypatch.setattr(reach, "moved", refused)
    report = gradscope.check(f"{DATA}/symmetric.py:symmetric_spectrum",
                             at={"m": "randn(4,4)"})
    assert report.passed
    assert all("stepped aside" not in n for n in report.notes)
    (note,) = [d for d in report.diagnostics if d.kind == "inner_departure"]
    assert "not proven (its second forward and backward raised RuntimeError)" in note.message
