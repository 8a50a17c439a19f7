"""The sides of a branch site: an expression op's pieces named by its argument's values, user
code's comparisons, clamps, relus and signs by their threshold's sides."""

from __future__ import annotations

import torch

from gradscope.targets.base import BranchSite
from gradscope.targets.branches import described, pieces, sides

X = (torch.arange(9, dtype=torch.float64) - 4) * 0.5  # −2 … 2, an exact zero


def test_pieces_are_named_by_the_values_in_them():
    assert pieces(torch.sign(X), X, "x") == (("x in [−2, −0.5]", 4), ("x = 0", 1),
                                            ("x in [0.5, 2]", 4))
    many = pieces(torch.floor(X), X, "x")  # five pieces: four named, the rest counted
    assert len(many) == 5 and many[-1] == ("1 more piece(s)", 1)


def test_user_code_sides():
    assert sides("relu", (X,), {}, None) == (("< 0", 4), ("= 0", 1), ("> 0", 4))
    assert sides("clamp", (X, -1.0, 1.0), {}, None) == (("below its min", 2), ("inside", 5),
                                                        ("above its max", 2))
    assert sides("clamp_min", (X, 1.0), {}, None)[0] == ("below its min", 6)
    assert sides("hardtanh", (X,), {}, None)[1] == ("inside", 5)
    assert sides("lt", (X, 0.0), {}, X < 0) == (("true", 4), ("false", 5))
    assert sides("maximum", (X, torch.zeros(9)), {}, None)[0] == ("first larger", 4)


def test_what_is_no_branch():
    assert sides("sin", (X,), {}, None) == ()  # no threshold
    assert sides("relu", (torch.arange(3),), {}, None) == ()  # integers: no gradient
    assert sides("lt", (X, 0.0), {}, X) == ()  # a comparison that made no mask


def test_one_sided_sites():
    both = BranchSite("w", "lt", (("true", 3), ("false", 2)))
    one = BranchSite("w", "lt", (("true", 5), ("false", 0)))
    single = BranchSite("w", "lt", (("true", 1), ("false", 0)))  # one element: no claim
    assert not both.one_sided and one.one_sided and not single.one_sided
    assert described(one.sides) == "true: 5"
