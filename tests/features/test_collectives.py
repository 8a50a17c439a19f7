"""Custom Functions of distributed code checked in place across ranks, only where the target
already fails: the Function at fault named by its backward's def line, with how it is wrong
across ranks — and nothing named where the target passes, or where no Function is at fault."""

from __future__ import annotations

import inspect

import pytest

from gradscope.features.collectives import _factor_how
from tests.data import parallel
from tests.targets.distributed.checked import checked


def _culprits(name: str) -> list:
    return [d for d in checked(name).diagnostics if d.kind == "culprit"]


def _line(cls: type) -> str:
    """The backward's `def` line (below its @staticmethod)."""
    lines, start = inspect.getsourcelines(cls.backward)
    offset = next(i for i, text in enumerate(lines) if text.strip().startswith("def "))
    return f"parallel.py:{start + offset}"


@pytest.mark.slow
def test_a_copy_without_its_all_reduce_is_named_with_its_line():
    (found,) = _culprits("MLPForgetsAllReduce")
    assert found.op == "CopyForgetsAllReduce.backward"
    assert found.where.endswith(_line(parallel.CopyForgetsAllReduce))
    assert "its own part" in found.message and "all-reduce missing" in found.message
    # the argument by forward's own name, as the culprit line of a one-process check says it
    assert "across ranks for its argument x:" in found.message
    assert "CopyForgetsAllReduce.backward" in checked("MLPForgetsAllReduce").to_text()


@pytest.mark.parametrize("name, how", [("MLPReducesTwice", "2 × the derivative on every rank"),
                                       ("MLPAveragesGradient", "1/2 × the derivative")])
@pytest.mark.slow
def test_a_reduction_too_many_or_too_few_is_the_world_size(name, how):
    (found,) = _culprits(name)
    assert how in found.message and "world size" in found.message


@pytest.mark.slow
def test_a_gather_whose_backward_keeps_the_wrong_slice_names_the_rank():
    (found,) = _culprits("ColumnParallelWrongSplit")
    assert found.op == "GatherWrongSplit.backward"
    assert "rank(s) 1" in found.message and "wrong split" in found.message


@pytest.mark.slow
def test_a_rank_dependent_backward_is_wrong_on_that_rank_only():
    (found,) = _culprits("rank_scaled")
    assert "rank(s) 1 only" in found.message and "2 × the derivative" in found.message


@pytest.mark.slow
def test_nothing_is_named_where_no_function_is_at_fault():
    assert not _culprits("ColumnParallelNoCopy")  # the missing copy region is no Function
    assert not checked("ColumnParallelNoCopy").passed
    assert checked("ColumnParallelLinear").passed and not _culprits("ColumnParallelLinear")


@pytest.mark.slow
def test_under_ddp_the_recording_runs_with_its_reduction_off_and_blames_no_function():
    # (an all-reduce autograd never sees is no Function: nothing to name; the recording under
    # no_sync() leaves DDP's next call working: the run's other checks still ran after it)
    report = checked("DataParallelDoubleReduce")
    assert not report.passed and not _culprits("DataParallelDoubleReduce")
    assert not any("not checked in place across ranks" in n for n in report.notes)


def test_factors_of_the_world_size_are_named():
    assert "reduced once too often" in _factor_how(4.0, 4)[0]
    assert "a mean" in _factor_how(0.25, 4)[0]
    # (a ratio read along one seeded direction is said as that, never as a factor)
    other = _factor_how(1.7, 4)[0]
    assert "1.7 × the forward's difference quotient" in other and "along a seeded" in other


@pytest.mark.slow
def test_a_gather_whose_backward_reduces_nothing_is_a_missing_reduce_scatter():
    import gradscope
    from tests.targets.distributed.checked import PAR

    report = gradscope.check(f"{PAR}:SequenceParallelMissingReduceScatter", nproc=2,
                             shape={"x": (4, 4)})
    (found,) = [d for d in report.diagnostics if d.kind == "culprit"]
    assert found.op == "GatherWithoutReduceScatter.backward"
    assert "its own output only" in found.message and "reduce-scatter" in found.message
    assert gradscope.check(f"{PAR}:SequenceParallelMLP", nproc=2, shape={"x": (4, 4)}).passed
