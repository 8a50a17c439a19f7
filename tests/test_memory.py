from __future__ import annotations

import subprocess
import sys

import pytest

from gradscope import memory

# in a fresh process (a long-lived one's heap is in whatever state its past left it): a 30 MB
# block freed raises glibc's mmap threshold, so the next blocks below it come from the heap
# and stay resident after they are freed — until released() hands them back
FRESH = """
import torch
from gradscope import memory
def resident():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096
big = torch.ones(30 << 20, dtype=torch.uint8)
del big
blocks, kept = [], []
for _ in range(40):  # 160 MB touched, each block walled in by one that stays
    blocks.append(torch.ones(4 << 20, dtype=torch.uint8))
    kept.append(torch.ones(1 << 16, dtype=torch.uint8))
del blocks
before = resident()
assert not memory.released()  # (160 MB free: not worth it by default)
assert memory.released(worth=100 << 20)
print((before - resident()) >> 20)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or memory._libc() is None,
                    reason="glibc's malloc_trim only")
def test_freed_model_sized_temporaries_are_handed_back():
    done = subprocess.run([sys.executable, "-c", FRESH], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.split()[-1]) > 100  # MB handed back


def test_released_is_harmless_where_there_is_nothing_to_hand_back(monkeypatch):
    monkeypatch.setattr(memory, "_libc", lambda: None)  # (macOS, musl: nothing to ask)
    assert memory.released(worth=0) is False and memory.free_in_heap() is None


def test_gpu_peaks_are_read_only_where_cuda_runs(monkeypatch):
    import torch

    if not torch.cuda.is_available():
        assert memory.gpu_peak() is None
    # where CUDA runs: the allocator's peak, never reset (the user's statistics stay theirs)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda: 1234)
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda: pytest.fail("reset"))
    assert memory.gpu_peak() == 1234


def test_a_cpu_report_carries_no_gpu_peaks():
    import gradscope

    report = gradscope.check("sin(x)*y", shape={"x": (3,), "y": (3,)})
    assert report.passed and not any(k.startswith("gpu_peak.") for k in report.timings)
