"""A rank's part of the check: its server refuses an evaluation before it built the target;
what travels to rank 0 is on the CPU; an input declared sharded is drawn anew on every rank
but 0."""

from __future__ import annotations

import pytest
import torch

from gradscope.errors import UsageError
from gradscope.options import Options
from gradscope.targets.distributed.rank import Server, _own_draws, settled
from tests.paths import DATA


def test_an_evaluation_before_the_build_is_refused():
    with pytest.raises(UsageError, match="before it built a target"):
        Server().handle(("value", {}))
    assert Server().handle(("release",)) is None


def test_what_travels_is_a_copy_on_the_cpu():
    t = torch.ones(3)
    copy = settled(t)
    assert copy.device.type == "cpu" and copy.data_ptr() != t.data_ptr()


def test_a_sharded_input_is_drawn_anew_on_every_rank_but_0(monkeypatch):
    import torch.distributed as dist

    from gradscope.inputs.bind import bind
    from gradscope.targets import resolve

    target = resolve(f"{DATA}/parallel.py:rank_scaled")
    options = Options(sharded=("x",), shape={"x": (4,)})
    bound = bind(options, target)
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_rank", lambda: 0)
    assert _own_draws(options, target, bound) is bound
    monkeypatch.setattr(dist, "get_rank", lambda: 1)
    other = _own_draws(options, target, bound)
    assert not torch.equal(other.cast["x"], bound.cast["x"])
    assert "rank 1's own draw" in other.values["x"].origin
    given = bind(Options(sharded=("x",), at={"x": "1,2"}), target)  # (given: kept as given)
    assert _own_draws(Options(sharded=("x",), at={"x": "1,2"}), target, given) is given
