"""Gradient hooks checked in place: a hook that returns None or the gradient unchanged is fine;
one that changes it is wrong, with how (a factor, a sign) read from what it was given."""

from __future__ import annotations

import torch

from gradscope.compare.tolerance import Tolerance
from gradscope.features.inplace.calls import HookCall
from gradscope.features.inplace.hooks import check_hooks

TOL = Tolerance.for_dtype("float64")
G = torch.tensor([0.5, -2.0, 3.0], dtype=torch.float64)


def _call(hook, where="model.py:12"):
    out = hook(G)
    return HookCall(hook, where, G.clone(),
                    out.clone() if isinstance(out, torch.Tensor) else None)


def test_hooks_that_leave_the_gradient_are_not_wrong():
    (check,) = check_hooks([_call(lambda g: None), _call(lambda g: None)], TOL)
    assert check.calls == 2 and check.elements == 6 and check.wrong == ()
    (same,) = check_hooks([_call(lambda g: g.clone() * (1 + 1e-15))], TOL)
    assert same.wrong == ()


def test_a_scaling_hook_is_wrong_by_its_factor_and_grouped_by_site():
    checks = check_hooks([_call(lambda g: g * 0.5), _call(lambda g: g * 0.5),
                          _call(lambda g: -g, "other.py:3")], TOL)
    halve, flip = checks
    assert halve.where == "model.py:12" and halve.calls == 2 and len(halve.wrong) == 2
    assert halve.wrong[0].relation.factor == 0.5 and halve.wrong[0].count == 3
    assert flip.label.startswith("gradient hook ") and flip.label.endswith(".<lambda> (other.py:3)")
    assert flip.wrong[0].relation.factor == -1


def test_a_clamp_is_wrong_only_where_it_clamps():
    (check,) = check_hooks([_call(lambda g: g.clamp(-1, 1))], TOL)
    assert check.wrong[0].count == 2  # −2 and 3; 0.5 passes through
