"""--nproc 2 on gloo: Megatron-style tensor-parallel regions and DDP, correct and with planted
collective bugs, checked as one function of replicated and sharded tensors."""

from __future__ import annotations

import pytest
import torch

import gradscope
from gradscope.targets.distributed.target import ratio, same
from tests.targets.distributed.checked import PAR, checked


@pytest.mark.slow
def test_a_correct_tensor_parallel_mlp_passes_with_its_shards_named_per_rank():
    report = checked("ParallelMLP")
    assert report.passed, report.to_text()
    names = [i.name for i in report.inputs]
    assert "x" in names and "fc1.weight@rank0" in names and "fc1.weight@rank1" in names
    assert "fc2.weight@rank1" in names and "fc1.weight" not in names
    text = " ".join(report.notes)
    assert "replicated" in text and "sharded" in text and "counted once" in text


@pytest.mark.slow
def test_a_double_all_reduce_is_a_factor_of_the_world_size():
    report = checked("MLPReducesTwice")
    assert not report.passed
    pattern = [d for d in report.diagnostics if d.kind == "mismatch_pattern"]
    assert pattern and pattern[0].factor == pytest.approx(2.0)
    assert "world size" in pattern[0].message
    assert {i.name: i.status for i in report.inputs}["fc2.weight@rank1"] == "ok"


@pytest.mark.slow
def test_ddp_passes_and_an_all_reduce_autograd_never_sees_halves_the_gradients():
    right = checked("DataParallel")
    assert right.passed, right.to_text()
    assert any("DistributedDataParallel keeps it the same" in n for n in right.notes)
    wrong = checked("DataParallelDoubleReduce")
    assert not wrong.passed
    factors = {d.factor for d in wrong.diagnostics if d.kind == "mismatch_pattern"}
    assert factors and all(f == pytest.approx(0.5) for f in factors)


def test_same_is_equality_up_to_round_off():
    a = torch.tensor([1.0, 2.0], dtype=torch.float64)
    assert same(a, a + 1e-15, torch.float64)
    assert not same(a, a + 1e-6, torch.float64)
    assert not same(a, a[:1], torch.float64)


def testratio_names_a_constant_factor_only():
    a = torch.tensor([1.0, -2.0, 0.0], dtype=torch.float64)
    assert ratio(a, 3 * a) == pytest.approx(3.0)
    assert ratio(a, a + 1) is None
    assert ratio(torch.zeros(2, dtype=torch.float64), a[:2]) is None


@pytest.mark.slow
def test_dtensor_tensor_parallelism_passes_with_placements_read_from_the_code():
    report = checked("TensorParallelBlock")
    assert report.passed, report.to_text()
    note = " ".join(report.notes)
    assert "up.weight (DTensor placements S(0))" in note
    assert "down.bias (DTensor placements R)" in note
    assert "down.bias@rank0" not in [i.name for i in report.inputs]


@pytest.mark.slow
def test_a_function_over_a_tensor_parallel_block_gets_its_dtensor_parameters_in_place():
    # (the block is reached by a function, held beside it: its DTensor parameters are written
    # in place as a module target's are, never swapped for plain tensors)
    report = gradscope.check(f"{PAR}:tp_block_loss", nproc=2, shape={"x": (3, 4)})
    assert report.passed, report.to_text()
    assert "TP_BLOCK.up.weight (DTensor placements S(0))" in " ".join(report.notes)


@pytest.mark.slow
def test_fsdp2_passes_its_shards_read_from_placements_and_its_wrapper_named():
    report = checked("FullySharded")
    assert report.passed, report.to_text()
    assert "net.0.weight@rank1" in [i.name for i in report.inputs]
    assert "net.0.weight (DTensor placements S(0))" in " ".join(report.notes)


@pytest.mark.slow
def test_gradients_completed_after_backward_are_declared_by_either_option():
    import gradscope
    from tests.targets.distributed.checked import PAR

    shaped = {"nproc": 2, "shape": {"x": (4, 4)}}
    target = f"{PAR}:SequenceParallelNorm"
    bare = gradscope.check(target, **shaped)
    assert not bare.passed
    (found,) = [d for d in bare.diagnostics if d.kind == "ranks_disagree"]
    assert found.inputs == ["weight"] and "add up to the derivative" in found.message
    assert gradscope.check(target, after_backward="finalize_grads", **shaped).passed
    partial = gradscope.check(target, partial_grad=("weight",), **shaped)
    assert partial.passed and any("--partial-grad" in n for n in partial.notes)
