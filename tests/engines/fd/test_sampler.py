"""A sample of columns: seeded (the same elements for the same seed), extrapolated from four
points from the start, and marked as such."""

from __future__ import annotations

import pytest
import torch

from gradscope.engines.fd import FiniteDifferences
from gradscope.engines.fd.policy import DEFAULT_EPS


def _fd(n: int) -> FiniteDifferences:
    def traced(values):
        x = values["x"]
        return (x - x.mean()) ** 2, []

    return FiniteDifferences(traced, {"x": torch.linspace(-1, 1, n, dtype=torch.float64)},
                             eps=DEFAULT_EPS, elementwise=set())


def test_the_same_seed_samples_the_same_columns_and_they_are_right():
    a, b = _fd(50).sampled("x", 7, seed=3), _fd(50).sampled("x", 7, seed=3)
    assert torch.equal(a.sampled, b.sampled) and a.sampled.numel() == 7
    assert not torch.equal(a.sampled, _fd(50).sampled("x", 7, seed=4).sampled)
    assert a.points is None and a.forward_calls == 4 * 7 and a.note.startswith("7 of 50")
    x = torch.linspace(-1, 1, 50, dtype=torch.float64, requires_grad=True)
    jac = torch.autograd.functional.jacobian(lambda t: (t - t.mean()) ** 2, x)
    assert torch.allclose(a.partial, jac[:, a.sampled], atol=1e-9)


@pytest.mark.parametrize("n, count", [(10, 10), (40, 10), (1_000_000, 1_000), (50, 3)])
def test_distinct_positions_are_seeded_and_never_repeat(n, count):
    from gradscope.engines.fd.sampler import distinct

    drawn = distinct(n, count, torch.Generator().manual_seed(3))
    assert drawn.numel() == count == drawn.unique().numel()
    assert int(drawn.min()) >= 0 and int(drawn.max()) < n
    assert torch.equal(drawn, distinct(n, count, torch.Generator().manual_seed(3)))
