"""The switch that routes torch's gradcheck through the drop-in: installed and removed, and a
script or another test runner run with it."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

import gradscope
from gradscope.testing import switch
from tests.paths import ROOT


def test_install_and_uninstall():
    original = torch.autograd.gradcheck
    switch.install()
    try:
        assert torch.autograd.gradcheck is gradscope.gradcheck and switch.installed()
        assert sys.modules["torch.autograd.gradcheck"].gradgradcheck is gradscope.gradgradcheck
    finally:
        switch.uninstall()
    assert torch.autograd.gradcheck is original and not switch.installed()


@pytest.mark.slow
def test_switch_runs_a_script_with_gradcheck_routed(tmp_path):
    script = tmp_path / "checks.py"
    script.write_text("import torch\n"
                      "x = torch.randn(3, dtype=torch.float64, requires_grad=True)\n"
                      "print(torch.autograd.gradcheck(torch.sin, (x,)))\n")
    done = subprocess.run([sys.executable, "-m", "gradscope.testing.switch", str(script)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0 and done.stdout.strip() == "True"
    assert "1 gradcheck call(s) routed through gradscope: 1 passed" in done.stderr
