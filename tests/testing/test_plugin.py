"""The pytest plugin offers assert_gradients as a fixture (installed via the entry point)."""

import torch


def test_fixture_is_the_helper(assert_gradients):
    from gradscope.testing import assert_gradients as helper

    assert assert_gradients is helper
    assert assert_gradients("x * y", x=torch.ones(2), y=torch.ones(2)).passed
