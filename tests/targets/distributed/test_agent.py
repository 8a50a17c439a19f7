"""The agent of a launch: torch's elastic launch of N workers, and the ranks that ended badly
written for the launcher to name (a worker that cannot even read its job)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from gradscope.targets.distributed.agent import WORKER
from tests.paths import ROOT


@pytest.mark.slow
def test_a_worker_that_fails_is_written_down_with_its_exit_code(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GRADSCOPE_RANK_OF": "test"}
    done = subprocess.run([sys.executable, "-m", "gradscope.targets.distributed.agent",
                           str(tmp_path), "1", str(os.getpid())], env=env, timeout=180,
                          capture_output=True, text=True)
    assert done.returncode == 1
    assert torch.load(tmp_path / "failures.pt") == {0: 1}
    assert (tmp_path / "rank0.error").exists()  # (no job.pt: it says why)
    assert "gradscope._rank" in WORKER
