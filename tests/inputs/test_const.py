"""--const: inputs that are data (class indices, masks), never differentiated or perturbed."""

from __future__ import annotations

import json

import pytest
import torch

import gradscope
from gradscope.errors import UsageError
from tests.command import run as _run
from tests.paths import ROOT

DATA = ROOT / "tests" / "data" / "consts.py"


def test_class_indices_stay_integers_and_get_no_table(capsys):
    code, out, err = _run(capsys, "check", "F.cross_entropy(x, t)", "--shape", "x=3,4",
                          "--const", "t=0,3,1", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert [i["name"] for i in report["inputs"]] == ["x"]
    assert report["constants"] == {"t": {"shape": [3], "dtype": "int64", "origin": "given"}}
    assert report["inputs"][0]["symbolic_skipped"] is None


def test_the_header_lists_the_data(capsys):
    code, out, _ = _run(capsys, "check", "x * m", "--at", "x=1,2,3", "--const", "m=0.5,1,0")
    assert code == 0 and "const m" in out and "float64" not in out.split("const m")[1][:20]


def test_floating_data_is_cast_like_an_input():
    report = gradscope.check("sum(x * m)", at={"x": "1,2,3"}, const={"m": "0.5,1.5,0"},
                             dtype="float32")
    assert report.passed and report.constants["m"]["dtype"] == "float64"
    assert [i.name for i in report.inputs] == ["x"]


def test_python_targets_receive_integer_data():
    report = gradscope.check(f"{DATA}:classify", shape={"logits": "4,5"},
                             const={"target": "randint(0,5,4)"})
    assert report.passed and [i.name for i in report.inputs] == ["logits"]
    mask = torch.tensor([True, False, True])
    report = gradscope.check(f"{DATA}:masked_mean", at={"x": "1,2,3"}, const={"mask": mask})
    assert report.passed and report.constants["mask"]["dtype"] == "bool"


@pytest.mark.parametrize("kw, fragment", [
    ({"at": {"t": "1"}, "const": {"t": "0"}}, "--const t makes t data"),
    ({"const": {"z": "1"}}, "--const names `z`, which is not an input"),
    ({"const": {"x": "1", "t": "0"}}, "every input is --const"),
])
def test_bad_data_is_exit_2(kw, fragment):
    with pytest.raises(UsageError, match=fragment):
        gradscope.check("x.gather(0, t)", **kw)


def test_index_arguments_ask_for_data():
    with pytest.raises(UsageError, match=r"takes integers .* --const"):
        gradscope.check("x.gather(0, t)", at={"x": "1,2,3", "t": "0,1,1"})


@pytest.mark.slow
def test_a_run_config_checks_const_names_before_running(tmp_path, capsys):
    (tmp_path / "pyproject.toml").write_text(
        '[[tool.gradscope.checks]]\ntarget = "F.cross_entropy(x, t)"\nconst = {z = "0,1"}\n')
    code, _, err = _run(capsys, "run", str(tmp_path / "pyproject.toml"))
    assert code == 2 and "`const` names `z`" in err
