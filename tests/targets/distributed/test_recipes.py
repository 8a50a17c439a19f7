"""The standard recipes of PyTorch's distributed APIs, as their users write them
(tests/data/recipes/), each checked right and with a planted bug: tensor and sequence
parallelism through `parallelize_module`, `to_local` with and without `grad_placements`, a loss
under `loss_parallel`, DDP (plain, `no_sync` accumulation, `find_unused_parameters` with a head
per rank), FSDP2 `fully_shard` alone and on a 2-D mesh with tensor parallelism. A right recipe
passes; a wrong one fails naming the tensor, the rank where the ranks tell, and the culprit
Function with its line where there is one. (Megatron-style regions: test_target.py.)"""

from __future__ import annotations

import pytest

import gradscope
from tests.paths import DATA

RECIPES = f"{DATA}/recipes"


def _check(target: str, nproc: int = 2, **options):
    return gradscope.check(f"{RECIPES}/{target}", nproc=nproc, **options)


def _culprits(report) -> list:
    return [d for d in report.diagnostics if d.kind == "culprit"]


def _failing(report) -> set[str]:
    return {i.name for i in report.inputs if i.status == "mismatch"}


@pytest.mark.slow
def test_tensor_parallel_block_right_and_with_an_activation_off_on_the_shards():
    shape = {"x": (3, 8)}
    right = _check("tensor_parallel.py:Block", shape=shape)
    assert right.passed, right.to_text()
    assert "up.weight (DTensor placements S(0))" in " ".join(right.notes)
    assert _check("tensor_parallel.py:block_loss", shape=shape).passed
    wrong = _check("tensor_parallel.py:BlockGeluOff", shape=shape)
    assert not wrong.passed
    (culprit,) = _culprits(wrong)
    assert culprit.op == "GeluOff.backward" and "tensor_parallel.py:" in culprit.where
    assert {"up.weight@rank0", "up.weight@rank1"} <= _failing(wrong)
    assert "down.bias" not in _failing(wrong)  # (after the activation: its gradient is right)


@pytest.mark.slow
def test_sequence_parallel_right_and_with_a_fused_norm_left_out_of_the_plan():
    shaped = {"shape": {"x": (2, 4, 8)}, "sharded": ("x",)}
    right = _check("tensor_parallel.py:SequenceParallelBlock", **shaped)
    assert right.passed, right.to_text()
    assert any("rank 1's own draw" in i.origin for i in right.inputs if i.name == "x@rank1")
    wrong = _check("tensor_parallel.py:SequenceParallelFusedNorm", **shaped)
    assert not wrong.passed
    (found,) = [d for d in wrong.diagnostics if d.kind == "ranks_disagree"]
    assert found.inputs == ["norm.weight"] and found.where == "rank 1"
    assert "add up to the derivative" in found.message
    assert _culprits(wrong)[0].op == "RMSNorm.backward"


@pytest.mark.slow
def test_to_local_with_its_grad_placements_and_without():
    right = _check("dtensor_local.py:Experts", shape={"x": (3, 4)})
    assert right.passed, right.to_text()
    wrong = _check("dtensor_local.py:ExpertsWithoutGradPlacements", shape={"x": (3, 4)})
    assert not wrong.passed
    disagree = {d.inputs[0]: d for d in wrong.diagnostics if d.kind == "ranks_disagree"}
    assert set(disagree) == {"x", "gate"} and disagree["x"].where == "rank 1"
    assert "add up to the derivative" in disagree["x"].message


@pytest.mark.slow
def test_a_loss_over_sharded_logits_under_loss_parallel_right_and_averaged():
    shaped = {"shape": {"x": (5, 4)}, "context": "loss_parallel"}
    right = _check("loss_parallel_lm.py:Head", **shaped)
    assert right.passed, right.to_text()
    wrong = _check("loss_parallel_lm.py:HeadMeanWhereSumBelongs", **shaped)
    assert not wrong.passed
    (culprit,) = _culprits(wrong)
    assert culprit.op == "MeanWhereSumBelongs.backward" and "a mean where the sum" in \
        culprit.message
    assert "proj.weight" in _failing(wrong) and "out.weight@rank0" not in _failing(wrong)


@pytest.mark.slow
def test_ddp_on_each_ranks_slice_of_the_batch():
    plain = _check("ddp.py:Plain", shape={"x": (4, 3)})
    assert plain.passed, plain.to_text()
    assert any("each rank's data" in n for n in plain.notes)
    hooked = _check("ddp.py:HookScalesOnRankOne", shape={"x": (4, 3)})
    assert not hooked.passed and _failing(hooked) == {"ddp.module.0.weight"}


@pytest.mark.slow
def test_ddp_accumulation_under_no_sync_right_and_never_synced():
    right = _check("ddp.py:Accumulated", shape={"x": (8, 3)})
    assert right.passed, right.to_text()
    wrong = _check("ddp.py:AccumulatedNeverSynced", shape={"x": (8, 3)})
    assert not wrong.passed
    disagree = [d for d in wrong.diagnostics if d.kind == "ranks_disagree"]
    assert {d.inputs[0] for d in disagree} >= {"ddp.module.0.weight", "ddp.module.2.bias"}
    assert {d.where for d in disagree} == {"rank 1"}


@pytest.mark.slow
def test_ddp_with_unused_parameters_and_a_head_per_rank_passes():
    report = _check("ddp.py:HeadPerRank", shape={"x": (4, 3)})
    assert report.passed, report.to_text()


@pytest.mark.slow
@pytest.mark.parametrize("nproc", [1, 2])
def test_fully_shard_per_block_and_root(nproc):
    right = _check("fsdp.py:Sharded", nproc, shape={"x": (4, 4)})
    assert right.passed, right.to_text()
    assert "fully_shard" in " ".join(right.notes)


@pytest.mark.slow
def test_fully_shard_with_a_backward_that_drops_a_term_names_it():
    wrong = _check("fsdp.py:ShardedSwishDropsATerm", shape={"x": (4, 4)})
    assert not wrong.passed
    assert {c.op for c in _culprits(wrong)} == {"SwishDropsATerm.backward"}
    assert "blocks.0.up.weight@rank0" in _failing(wrong)
    assert "head.bias@rank0" not in _failing(wrong)  # (its one element: rank 0's alone)


@pytest.mark.slow
def test_fully_shard_over_data_parallel_and_tensor_parallel_on_a_2d_mesh():
    right = _check("fsdp.py:ShardedAndParallel", 4, shape={"x": (4, 4)})
    assert right.passed, right.to_text()
    names = {i.name for i in right.inputs}
    assert "head.bias@rank0+1" in names  # (a shard the tensor-parallel ranks both hold)
    assert "blocks.0.up.weight@rank3" in names
    wrong = _check("fsdp.py:ShardedAndParallelSwishDropsATerm", 4, shape={"x": (4, 4)})
    assert not wrong.passed
    assert {c.op for c in _culprits(wrong)} == {"SwishDropsATerm.backward"}
