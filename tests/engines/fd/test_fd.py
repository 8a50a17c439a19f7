"""The package loads its names on first use: the step policy's numbers (read by the options,
which `gradscope --help` needs) come without torch."""

from __future__ import annotations

import pytest

import gradscope.engines.fd as fd
from tests.paths import python_prints


def test_the_policy_needs_no_torch():
    out = python_prints("import sys; import gradscope.engines.fd.policy as p, "
                        "gradscope.options; print('torch' in sys.modules, p.DEFAULT_EPS)")
    assert out == ["False", "0.0001"]


def test_names_load_on_first_use():
    from gradscope.engines.fd.engine import FiniteDifferences

    assert fd.FiniteDifferences is FiniteDifferences and "Estimate" in fd.__all__
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        fd.Nope  # noqa: B018
