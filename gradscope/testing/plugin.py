"""pytest plugin (entry point `gradscope`): the fixture `assert_gradients`."""

from __future__ import annotations

import pytest


@pytest.fixture
def assert_gradients():
    """`assert_gradients(fn, *inputs, grad=None, atol=None, rtol=None, **options)`."""
    from gradscope.testing.assertions import assert_gradients as helper

    return helper
