"""One seed per purpose: reproducible, and independent of every other purpose."""

from __future__ import annotations

import torch

from gradscope.rng import generator, seed_for


def test_a_seed_per_label():
    assert seed_for(0, "x") == seed_for(0, "x")
    assert len({seed_for(0, "x"), seed_for(0, "y"), seed_for(1, "x")}) == 3
    assert 0 <= seed_for(7, ":upstream0") < 2 ** 48


def test_the_generator_draws_the_same_numbers_for_the_same_label():
    a = torch.rand(4, generator=generator(3, "w"))
    b = torch.rand(4, generator=generator(3, "w"))
    c = torch.rand(4, generator=generator(3, "v"))
    assert torch.equal(a, b) and not torch.equal(a, c)
