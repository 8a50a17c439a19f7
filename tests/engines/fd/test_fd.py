"""The package loads its names on first use: the step policy's numbers (read by the options,
which `gradscope --help` needs) come without torch."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import gradscope.engines.fd as fd
from tests.paths import ROOT


def test_the_policy_needs_no_torch():
    probe = ("import sys; import gradscope.engines.fd.policy as p, gradscope.options; "
             "print('torch' in sys.modules, p.DEFAULT_EPS)")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         env=env, check=True).stdout.split()
    assert out == ["False", "0.0001"]


def test_names_load_on_first_use():
    from gradscope.engines.fd.engine import FiniteDifferences

    assert fd.FiniteDifferences is FiniteDifferences and "Estimate" in fd.__all__
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        fd.Nope  # noqa: B018
