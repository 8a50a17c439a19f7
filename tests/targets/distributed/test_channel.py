"""Messages between the coordinator and a rank: framed bytes over OS pipes, tensors by value,
any size, and the far end's closing read as EOF."""

from __future__ import annotations

import os
import threading

import pytest
import torch

from gradscope.targets.distributed.channel import Channel, get, put


def _pair() -> tuple[Channel, Channel]:
    a_in, b_out = os.pipe()
    b_in, a_out = os.pipe()
    return Channel(a_in, a_out), Channel(b_in, b_out)


def test_tensors_and_tuples_arrive_by_value_whatever_their_size():
    ours, theirs = _pair()
    big = torch.arange(300_000, dtype=torch.float64)  # past a pipe's buffer: a reader is needed
    sent = ("grad", {"x": big}, 1.5)
    reader = threading.Thread(target=lambda: put(theirs, get(theirs)))
    reader.start()
    put(ours, sent)
    back = get(ours)
    reader.join()
    assert back[0] == "grad" and back[2] == 1.5 and torch.equal(back[1]["x"], big)
    ours.close()
    theirs.close()


def test_the_other_end_closing_is_eof():
    ours, theirs = _pair()
    theirs.close()
    with pytest.raises(EOFError):
        get(ours)
    ours.close()
    ours.close()  # (twice is harmless)
