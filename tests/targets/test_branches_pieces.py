"""Branch pieces labelled at once: a piece per element (sort's ranks) is counted in one pass."""

from __future__ import annotations

import torch

from gradscope.targets.branches import MAX_PIECES, pieces


def test_a_piece_per_element_is_named_and_the_rest_counted():
    values = torch.linspace(-1, 1, 200_000, dtype=torch.float64)
    ids = torch.arange(200_000).flip(0)  # one piece per element, ids against the values
    found = pieces(ids, values, "x")
    assert len(found) == MAX_PIECES + 1 and found[0] == ("x = \u22121", 1)
    assert found[-1] == (f"{200_000 - MAX_PIECES} more piece(s)", 200_000 - MAX_PIECES)


def test_pieces_are_in_the_order_of_their_values_with_ranges():
    values = torch.tensor([3.0, -2.0, 1.0, -1.0, 2.0], dtype=torch.float64)
    ids = torch.tensor([1, 0, 1, 0, 1])
    assert pieces(ids, values, "x") == (("x in [\u22122, \u22121]", 2), ("x in [1, 3]", 3))
