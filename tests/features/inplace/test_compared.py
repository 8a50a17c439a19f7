"""A call's backward compared with its own forward: an argument the forward never reads is not
compared, a flat forward's surrogate is seen, and a value partition is predicted where it was
not fitted only where the call's arguments moved bear it out."""

from __future__ import annotations

import torch

from gradscope.explain.relations import Arrays
from gradscope.features.inplace.compared import predicted
from gradscope.report.status import Status


def _arrays(wrong: list[bool]) -> Arrays:
    status = torch.tensor([Status.MISMATCH.code if w else Status.OK.code for w in wrong],
                          dtype=torch.int8)
    zeros = torch.zeros(len(wrong), dtype=torch.float64)
    return Arrays(zeros, zeros, zeros, status)


def test_a_partition_is_predicted_only_where_it_names_exactly_the_wrong_elements():
    x = torch.tensor([-2.0, -1.0, 1.0, 2.0])
    assert predicted("x < 0", _arrays([True, True, False, False]), {"x": x})
    assert not predicted("x < 0", _arrays([True, False, True, False]), {"x": x})
    assert not predicted("x < 0", None, None)  # (no comparison at other values: not held)
