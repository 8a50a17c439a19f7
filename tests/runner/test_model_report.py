"""Whole models (tests/data/stack.py: a pre-norm transformer stack in float32): every parameter
element checked, a report a person can read, and the tensors whose gradient is wrong named."""

from __future__ import annotations

import json

import pytest

import gradscope
from gradscope.render import text
from tests.paths import ROOT

STACK = ROOT / "tests" / "data" / "stack.py"
X = {"x": "randn(2,4,16)"}


@pytest.fixture(scope="module")
def passing():
    return gradscope.check(f"{STACK}:small_loss", at=X)


def test_a_float32_model_is_checked_element_by_element_on_a_float64_copy(passing):
    report = passing
    assert report.passed
    params = [i for i in report.inputs if i.role == "parameter"]
    assert len(params) == 38 and all(i.checked == i.total for i in report.inputs)
    assert any("float64 copy" in n for n in report.notes)


def test_the_summary_is_one_table_by_module(passing):
    report = passing
    out = text(report, "table")
    lines = out.splitlines()
    assert len(lines) <= 120 and "tensors by module" in out
    assert "parameters  38 tensors" in out and "small.blocks.1.fc1" in out
    assert "index" not in out  # no per-element table for a passing model
    modules = {m["module"]: m for m in json.loads(report.to_json())["modules"]}
    assert modules["small.blocks.2"]["status"] == "ok" and modules[""]["tensors"] == 39


@pytest.mark.slow
def test_a_typo_in_one_block_names_exactly_the_wrong_tensors():
    report = gradscope.check(f"{STACK}:small_typo_loss", at=X)
    assert not report.passed
    failing = {i.name for i in report.inputs if i.status == "mismatch"}
    # the typo sits between blocks.1.fc1 and blocks.1.fc2: every tensor before it is wrong
    names = [i.name for i in report.inputs]
    cut = names.index("small_typo.blocks.1.fc2.weight")
    assert failing == set(names[:cut])
    out = text(report, "table")
    assert "wrong gradients start at small_typo.blocks.1.fc1.bias" in out
    assert "small_typo.blocks.1.fc2.weight (which" in out.replace("\n", " ")
    modules = {m["module"]: m["status"] for m in json.loads(report.to_json())["modules"]}
    assert modules["small_typo.blocks.2"] == "ok" and modules["small_typo.blocks.0"] == "mismatch"
    assert out.count(" · parameter · shape") == 3  # per-element tables: the 3 nearest the output


MODELS = ROOT / "tests" / "data" / "models.py"


def test_dropout_is_refused_as_random_with_the_way_out():
    with pytest.raises(gradscope.UsageError, match=r"is random: two evaluations .*--eval"):
        gradscope.check(f"{MODELS}:dropout_loss", shape={"x": "4,8"})


def test_eval_mode_runs_on_a_copy_and_says_so():
    from tests.data import models

    report = gradscope.check(f"{MODELS}:dropout_loss", shape={"x": "4,8"}, mode="eval")
    assert report.passed and any("eval mode" in n for n in report.notes)
    assert models.dropped.training  # the user's module keeps its mode


def test_eval_and_train_are_short_for_the_mode(capsys):
    from tests.command import run

    code, out, _ = run(capsys, "check", f"{MODELS}:dropout_loss", "--shape", "4,8", "--eval")
    assert code == 0 and "checked in eval mode" in out
    code, _, err = run(capsys, "check", f"{MODELS}:dropout_loss", "--shape", "4,8", "--train")
    assert code == 2 and "is random" in err


def test_only_and_skip_select_by_glob_and_hold_the_rest():
    report = gradscope.check(f"{STACK}:small_loss", at=X, only=["small.blocks.1.*"])
    assert report.passed and {i.name.split(".")[2] for i in report.inputs} == {"1"}
    assert len(report.constants) == 39 - 12
    report = gradscope.check(f"{STACK}:small_loss", at=X, skip=["small.blocks.*", "x"])
    assert [i.name for i in report.inputs] == ["small.norm.weight", "small.norm.bias"]
    with pytest.raises(gradscope.UsageError, match="matches no input or parameter"):
        gradscope.check(f"{STACK}:small_loss", at=X, only=["nothing*"])
    with pytest.raises(gradscope.UsageError, match="leave no input or parameter"):
        gradscope.check(f"{STACK}:small_loss", at=X, skip=["*"])


def test_an_output_is_picked_from_a_tuple_or_a_dict():
    assert gradscope.check(f"{MODELS}:two_outputs", shape={"x": "4,8"}, output_index=0).passed
    assert gradscope.check(f"{MODELS}:as_dict", shape={"x": "4,8"}, output_key="loss").passed
    with pytest.raises(gradscope.UsageError, match=r"--output-index N"):
        gradscope.check(f"{MODELS}:two_outputs", shape={"x": "4,8"})
    with pytest.raises(gradscope.UsageError, match=r"keys loss, logits; pick one"):
        gradscope.check(f"{MODELS}:as_dict", shape={"x": "4,8"})
    with pytest.raises(gradscope.UsageError, match="picks none of them"):
        gradscope.check(f"{MODELS}:as_dict", shape={"x": "4,8"}, output_key="lost")
    with pytest.raises(gradscope.UsageError, match="both pick the output"):
        gradscope.check(f"{MODELS}:as_dict", shape={"x": "4,8"}, output_key="loss",
                        output_index=0)


def test_a_layer_far_quieter_than_its_neighbours_is_a_warning():
    report = gradscope.check(f"{STACK}:gated_loss", at=X)
    quiet = [d for d in report.diagnostics if d.kind == "quiet_layer"]
    assert report.passed and [d.where for d in quiet] == ["gated.inner.blocks.1.fc1"]
    assert "gradient norm of" in quiet[0].message
    assert not gradscope.check(f"{STACK}:gated_loss", at=X, fail_on="warning").passed


def test_a_layer_behind_dead_relus_gets_no_gradient_at_all():
    report = gradscope.check(f"{MODELS}:dead_loss", shape={"x": "4,8"})
    quiet = [d for d in report.diagnostics if d.kind == "quiet_layer"]
    assert [d.where for d in quiet] == ["dead.0"] and "no gradient at all" in quiet[0].message


def test_a_bare_round_names_its_line_its_module_and_the_tensors_it_starves():
    report = gradscope.check(f"{STACK}:small_quant_loss", at=X)
    (diag,) = [d for d in report.diagnostics if d.kind == "vanishing_gradient"]
    assert diag.op == "round" and diag.module == "small_quant.blocks.1"
    assert "stack.py:86:" in diag.where and "torch.round(" in diag.where
    starved = ("small_quant.blocks.1.fc1.bias, small_quant.blocks.1.fc1.weight, "
               "small_quant.blocks.1.norm2.bias, small_quant.blocks.1.norm2.weight get no "
               "gradient at all")
    assert starved in diag.message
    assert "small_quant.blocks.0 (12 tensors)" in diag.message  # the rest, grouped
    assert report.passed  # a warning: autograd is right that round passes nothing


def test_where_wrong_gradients_start_follows_the_forward_not_the_definition_order():
    report = gradscope.check(f"{STACK}:defined_late_loss", at=X)
    assert not report.passed
    assert report.forward_order[:3] == ["", "defined_late", "defined_late.early"]
    out = text(report, "table")
    assert ("wrong gradients start at defined_late.late.fc1.bias: the bug sits between it and "
            "defined_late.late.fc2.weight") in " ".join(out.split())
    failing = {i.name for i in report.inputs if i.status == "mismatch"}
    assert "defined_late.early.qkv.weight" in failing  # before the bug in the forward
    assert not any(n.startswith("defined_late.late.fc2") for n in failing)


@pytest.mark.slow
def test_markdown_of_a_model_is_the_summary_table_too(passing):
    out = passing.to_markdown()
    assert "| module / tensor | shape | checked |" in out and "| index |" not in out
    assert len(out.splitlines()) <= 120  # one row per tensor and module, not 39 tables
    assert "| **small.blocks.1.fc1** |" in out and "| small.blocks.1.fc1.weight | 64×16 |" in out
    failing = gradscope.check(f"{STACK}:small_typo_loss", at=X).to_markdown()
    assert "wrong gradients start at small_typo.blocks.1.fc1.bias" in failing
    assert failing.count("| index |") == 3  # the failing tensors nearest the output


def test_order_2_converts_and_switches_the_model_it_wraps():
    report = gradscope.check(f"{MODELS}:default_loss", shape={"x": "4,8"}, order=2, mode="train")
    assert report.passed
    assert any("float64 copy of the module" in n for n in report.notes)
    assert any(n.startswith("modules checked in train mode") for n in report.notes)
    plain = gradscope.check("x**2", mode="eval")
    assert any("--mode eval had nothing to switch" in n for n in plain.notes)
