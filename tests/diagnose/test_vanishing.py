"""A zero gradient below a vanishing op is an artefact only when the function still moves."""

from __future__ import annotations

import torch

from gradscope.diagnose.vanishing import confirm


def test_a_function_that_moves_is_confirmed_a_constant_one_is_not():
    values = {"x": torch.tensor([0.2, 1.4], dtype=torch.float64)}
    ones = torch.ones(2, dtype=torch.float64)
    assert confirm(lambda v: torch.round(v["x"]), values, {"x"}, ones) == {"x"}
    assert confirm(lambda v: 0 * v["x"], values, {"x"}, ones) == set()
    # softmax sums to one: constant for a ones upstream, not for another
    softmax = lambda v: torch.softmax(v["x"], 0)  # noqa: E731
    assert confirm(softmax, values, {"x"}, ones) == set()
    assert confirm(softmax, values, {"x"}, torch.tensor([1.0, -1.0],
                                                         dtype=torch.float64)) == {"x"}
