from __future__ import annotations

import sys

import pytest
import torch

from gradscope import memory


def _resident() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


@pytest.mark.skipif(not sys.platform.startswith("linux") or memory._trim() is None,
                    reason="glibc's malloc_trim only")
def test_freed_model_sized_temporaries_are_handed_back():
    # a 30 MB block freed raises glibc's mmap threshold: the next blocks below it come from the
    # heap, and stay resident after they are freed — until released() hands them back
    big = torch.ones(30 << 20, dtype=torch.uint8)
    del big
    blocks, kept = [], []
    for _ in range(40):  # 160 MB touched, each block walled in by one that stays
        blocks.append(torch.ones(4 << 20, dtype=torch.uint8))
        kept.append(torch.ones(1 << 16, dtype=torch.uint8))
    del blocks
    before = _resident()
    assert memory.released()
    assert _resident() < before - (100 << 20)


def test_released_is_harmless_where_there_is_nothing_to_hand_back(monkeypatch):
    monkeypatch.setattr(memory, "_trim", lambda: None)  # (macOS, musl: nothing to ask)
    assert memory.released() is False
