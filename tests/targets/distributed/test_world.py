"""The framing of rank 0's messages: a size bound and a deadline inside a read; and which of
several ranks' errors is said."""

from __future__ import annotations

import pytest
import torch

from gradscope.errors import TargetError, UsageError
from gradscope.targets.distributed.world import _first_failure, _rank_failed


class _Work:
    def __init__(self, fill=None, done=True):
        self.fill, self.done = fill, done

    def wait(self, timeout=None):
        return self.done


def _world():
    from gradscope.targets.distributed.world import World

    return World.__new__(World)


def test_a_reply_past_the_size_bound_is_refused_before_anything_is_buffered(monkeypatch):
    import torch.distributed as dist

    def irecv(tensor, src, group):
        tensor.fill_(1 << 62)
        return _Work()

    monkeypatch.setattr(dist, "irecv", irecv)
    with pytest.raises(EOFError, match="at most"):
        _world()._receive(1, None, 1.0)


def test_a_reply_that_never_comes_is_a_timeout(monkeypatch):
    import torch.distributed as dist

    monkeypatch.setattr(dist, "irecv", lambda tensor, src, group: _Work(done=False))
    with pytest.raises(TimeoutError):
        _world()._receive(1, None, 0.01)
    assert torch.get_num_threads() >= 1


def test_the_rank_whose_own_code_failed_is_named_before_one_that_only_waited_for_it():
    waited = _rank_failed(0, "rank 0 did not answer within 65 s", hang=True)
    cause = TargetError("the target's own code raised during forward:\nValueError: no")
    chosen = _first_failure([(0, waited), (1, cause)])
    assert str(chosen).startswith("the distributed target failed on rank 1: the target's own")
    assert chosen.rank == 1


def test_a_bad_request_is_said_as_it_is_whichever_rank_said_it():
    usage = UsageError("--at z names `z`, which is not an input")
    chosen = _first_failure([(0, _rank_failed(0, "x", hang=True)), (1, usage)])
    assert chosen is usage
