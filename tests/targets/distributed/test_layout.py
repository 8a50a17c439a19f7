"""The ranks' tensors as the inputs of one function: replicated or sharded as the options,
the code and the values say; a part several ranks hold is one input named by its holders; an
uneven split's empty shards hold no part; data under a data-parallel wrapper is each rank's
part of the gradient."""

from __future__ import annotations

import pytest
import torch

from gradscope.errors import UsageError
from gradscope.targets.distributed.layout import layout_of, parts_of
from gradscope.targets.distributed.rank import Described


def _rank(values, said=None, parts=None, empty=(), parameters=(), wrapper=""):
    return Described(names=tuple(values), parameters=tuple(parameters), values=values,
                     origins={}, said=said or {}, kind="module", wrapper=wrapper, empty=empty,
                     parts=parts or {})


def test_a_tensor_alike_everywhere_is_replicated_and_one_that_differs_is_sharded():
    a = torch.ones(2, dtype=torch.float64)
    layout = layout_of([_rank({"x": a, "w": a}), _rank({"x": a, "w": 2 * a})], (), ())
    assert not layout["x"].sharded and layout["x"].names == ("x",)
    assert layout["w"].names == ("w@rank0", "w@rank1")
    assert layout_of([_rank({"x": a}), _rank({"x": a})], ("x",), ())["x"].sharded


def test_a_part_the_tensor_parallel_ranks_both_hold_is_one_input_named_by_its_holders():
    said = {"w": "sharded: DTensor placements S(0)"}
    ranks = [_rank({"w": torch.full((1,), float(r // 2))}, said, {"w": (r // 2,)})
             for r in range(4)]
    layout = layout_of(ranks, (), ())["w"]
    assert layout.names == ("w@rank0+1", "w@rank2+3") and layout.ranks == (0, 2)
    assert layout.held() == [("w@rank0+1", (0, 1)), ("w@rank2+3", (2, 3))]


def test_an_uneven_splits_empty_shard_holds_no_part():
    said = {"b": "sharded: DTensor placements S(0)"}
    ranks = [_rank({"b": torch.ones(1)}, said, {"b": (0,)}), _rank({}, said, {"b": (1,)},
                                                                     empty=("b",))]
    assert layout_of(ranks, (), ())["b"].names == ("b@rank0",)


def test_ranks_that_built_other_inputs_are_refused():
    with pytest.raises(UsageError, match="different inputs"):
        layout_of([_rank({"x": torch.ones(1)}), _rank({"y": torch.ones(1)})], (), ())


def test_data_under_a_wrapper_is_each_ranks_part_averaged_and_declared_parts_are_summed():
    a = torch.ones(2, dtype=torch.float64)
    ranks = [_rank({"x": a, "w": a}, parameters=("w",), wrapper="DistributedDataParallel")] * 2
    layout = layout_of(ranks, (), ())
    assert parts_of(layout, (), "DistributedDataParallel", {"w"}) == {"x": "mean"}
    assert parts_of(layout, ("w",), "", {"w"}) == {"w": "sum"}


def test_a_pattern_that_matches_no_tensor_is_said_with_the_tensors():
    a = torch.ones(2, dtype=torch.float64)
    with pytest.raises(UsageError, match=r"--sharded nosuch: matches no tensor.*x, w"):
        layout_of([_rank({"x": a, "w": a})] * 2, ("nosuch",), ())
    assert layout_of([_rank({"x": a, "w": a})] * 2, ("w*",), ())["w"].sharded
