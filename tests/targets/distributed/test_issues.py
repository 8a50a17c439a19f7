"""Real reports about distributed gradients that reproduce on torch 2.13 CPU with gloo, caught
with --nproc 2; and --context, the region a backward must run in."""

from __future__ import annotations

import pytest

import gradscope
from tests.paths import DATA
from tests.targets.distributed.checked import checked, children

PAR = f"{DATA}/parallel.py"
SHARDED = {"nproc": 2, "shape": {"logits": (3, 4)}, "sharded": ("logits",)}


@pytest.mark.slow
def test_pytorch_190746_log_softmax_under_loss_parallel_gets_a_wrong_gradient():
    wrong = gradscope.check(f"{PAR}:parallel_log_softmax", context="loss_parallel", **SHARDED)
    assert not wrong.passed
    assert {i.name for i in wrong.inputs} == {"logits@rank0", "logits@rank1"}
    assert gradscope.check(f"{PAR}:parallel_log_softmax", **SHARDED).passed


@pytest.mark.slow
def test_pytorch_190007_a_functional_all_reduce_avg_whose_backward_raises_names_the_rank():
    from gradscope.errors import TargetError

    with pytest.raises(TargetError, match=r"(?s)rank [01]: .*only supports 'sum' reduction"):
        gradscope.check(f"{PAR}:functional_all_reduce_avg", nproc=2)
    assert not children()


@pytest.mark.slow
def test_an_in_place_all_reduce_of_the_loss_under_ddp_halves_every_gradient():
    # (autograd never sees dist.all_reduce(loss): the gradients are 1/2 of what it changes by)
    report = checked("DataParallelDoubleReduce")
    assert not report.passed
    assert {d.factor for d in report.diagnostics if d.kind == "mismatch_pattern"} == {0.5}


@pytest.mark.slow
def test_cross_entropy_under_loss_parallel_passes_in_its_context():
    assert gradscope.check(f"{PAR}:parallel_cross_entropy", context="loss_parallel",
                           **SHARDED).passed


@pytest.mark.slow
def test_a_backward_that_needs_its_region_runs_in_it_with_context():
    assert gradscope.check(f"{PAR}:needs_region", nproc=2, context="doubled_region").passed


@pytest.mark.slow
def test_context_names_must_exist_and_need_nproc(capsys):
    from tests.command import run

    code, _, err = run(capsys, "check", f"{PAR}:needs_region", "--nproc", "2", "--context",
                       "nothing")
    assert code == 2 and "has no `nothing`" in err
    code, _, err = run(capsys, "check", "x*2", "--context", "loss_parallel")
    assert code == 2 and "give --nproc N too" in err
