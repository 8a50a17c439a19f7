"""Custom ops as targets: a torch.library.custom_op object, torch.ops.NS.OP bound in a file or
reached through its attribute path, and NS::OP after --import; the schema's arguments as inputs
(Tensor), --arg values (numbers and flags, defaults kept) and optional tensors; a list of
tensors refused with what to do; never batched with vmap (no fallback warnings)."""

from __future__ import annotations

import pytest
import torch

import gradscope
from gradscope.errors import UsageError
from tests.command import run
from tests.data import custom_ops
from tests.paths import DATA

OPS = f"{DATA}/custom_ops.py"


def test_a_custom_op_object_is_a_target_and_its_wrong_backward_is_named():
    report = gradscope.check(f"{OPS}:sine_bug")
    assert not report.passed and report.target_kind == "function"
    (found,) = [d for d in report.diagnostics if d.kind == "culprit"]
    assert "custom op gradscope_culprits::sine_bug (custom_ops.py:" in found.op
    assert gradscope.check(f"{OPS}:sine").passed


def test_torch_ops_spellings_reach_the_same_op(capsys):
    assert gradscope.check(f"{OPS}:torch.ops.gradscope_culprits.sine").passed
    assert gradscope.check(torch.ops.gradscope_culprits.sine.default,
                           torch.linspace(-2, 2, 5)).passed
    code, _, err = run(capsys, "check", "gradscope_culprits::sine_bug", "--import", OPS)
    assert code == 1
    code, _, err = run(capsys, "check", "gradscope_nothing::here")
    assert code == 2 and "no op gradscope_nothing::here is registered" in err


def test_the_schema_gives_inputs_arguments_and_optional_tensors():
    op = custom_ops.scaled
    with pytest.raises(UsageError, match="`alpha` is annotated float"):
        gradscope.check(op)
    assert gradscope.check(op, arg={"alpha": 1.5}).inputs[0].name == "x"
    given = gradscope.check(op, arg={"alpha": 1.5, "twice": True},
                            at={"x": "3,4", "bias": "1,2"})
    assert given.passed and [i.name for i in given.inputs] == ["x", "bias"]


def test_a_list_of_tensors_is_refused_with_what_to_do():
    with pytest.raises(UsageError, match="a list of tensors; wrap the op in a def"):
        gradscope.check(custom_ops.stack_sum)


def test_no_vmap_fallback_warning_for_an_op_or_a_function_calling_one(capfd):
    gradscope.check(f"{OPS}:sine_bug")
    gradscope.check(f"{OPS}:uses_sine_bug")
    assert "BatchedFallback" not in capfd.readouterr().err


def test_a_list_of_numbers_is_an_argument_given_with_arg():
    with pytest.raises(UsageError, match="`dims` is annotated list and has no default"):
        gradscope.check(custom_ops.summed)
    report = gradscope.check(custom_ops.summed, arg={"dims": [0]}, shape={"x": (3, 4)})
    assert report.passed and [i.name for i in report.inputs] == ["x"]
