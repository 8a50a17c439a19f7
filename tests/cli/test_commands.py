"""End-to-end CLI: exit codes, one-line errors, JSON per the contract, files written atomically."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gradscope.cli import main
from gradscope.cli.output import write_atomic
from tests.command import SEED_ARGS, run
from tests.paths import DATA, ROOT


def test_seed_example_table(capsys):
    code, out, err = run(capsys, *SEED_ARGS)
    assert code == 0 and err == ""
    for text in ("3*a + 2*b*b + log(c)", "VJP = 3*v", "VJP = 4*b*v", "VJP = v/c", "0.0166667",
                 "0.142857", "1.25e-05", "PASSED", "seed 0"):
        assert text in out


def test_seed_example_json_has_contract_keys(capsys):
    code, out, _ = run(capsys, *SEED_ARGS, "--format", "json")
    assert code == 0
    report = json.loads(out)  # exactly one document, nothing else on stdout
    for key in ("schema", "version", "command", "target", "target_kind", "dtype", "passed",
                "output", "upstream", "inputs", "diagnostics"):
        assert key in report
    assert report["schema"] == "gradscope.report/1" and report["version"] == "0.1.0"
    assert report["command"] == "jvp" and report["target_kind"] == "expression"
    assert report["upstream"] == {"shape": [3], "values": [0.1, 1.0, 0.0001],
                                  "elements_reported": "all"}
    a = report["inputs"][0]
    for key in ("name", "role", "shape", "values", "autograd", "symbolic",
                "finite_difference", "formula", "max_abs_error", "status",
                "elements_reported"):
        assert key in a
    assert a["name"] == "a" and a["role"] == "input" and a["formula"] == "3*v"
    assert a["autograd"] == pytest.approx([0.3, 3.0, 3e-4])
    assert a["status"] == "ok" and a["elements_reported"] == "all"
    assert list(report)[:2] == ["schema", "version"]


def test_json_flag_and_nan_as_strings(capsys):
    code, out, _ = run(capsys, "check", "log(x)", "--at", "x=-1,1", "--json")
    report = json.loads(out)
    x = report["inputs"][0]
    assert x["finite_difference"][0] == "nan" and x["status"] == "undefined"
    assert report["output"]["values"][0] == "nan"
    assert code == 1  # NaN at the given inputs fails, as in gradcheck...
    code, out, _ = run(capsys, "check", "log(x)", "--at", "x=-1,1", "--json", "--allow-nan")
    assert code == 0 and json.loads(out)["nonfinite"] == ["output"]  # ...unless accepted


def test_markdown(capsys):
    code, out, _ = run(capsys, *SEED_ARGS, "--format", "markdown")
    assert code == 0 and out.startswith("## gradscope jvp")
    assert "| index | autograd | symbolic | finite diff | abs error | status |" in out


def test_output_file_written_atomically(capsys, tmp_path: Path):
    target = tmp_path / "report.json"
    code, out, err = run(capsys, *SEED_ARGS, "--json", "--output", str(target))
    assert code == 0 and out == "" and "report written" in err
    assert json.loads(target.read_text())["passed"] is True
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]  # no temp file left


def test_write_atomic_leaves_old_file_on_failure(tmp_path: Path):
    path = tmp_path / "r.txt"
    path.write_text("old")

    with pytest.raises(TypeError):
        write_atomic(path, 123)  # type: ignore[arg-type]
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["r.txt"]


def test_exit_1_on_mismatch_and_fail_on(capsys):
    wrong = f"{DATA}/rejecting.py:wrong_probability"
    code, out, _ = run(capsys, "check", wrong, "--at", "p=0.5,0.75")
    assert code == 1 and "FAILED" in out and "mismatch" in out
    code, _, _ = run(capsys, "check", wrong, "--at", "p=0.5,0.75", "--fail-on", "never")
    assert code == 0
    code, _, _ = run(capsys, "check", "abs(x)", "--at", "x=0,1")
    assert code == 0
    code, _, _ = run(capsys, "check", "abs(x)", "--at", "x=0,1", "--fail-on", "warning")
    assert code == 1


@pytest.mark.parametrize("args, fragment", [
    (["check", "__import__('os').system('x')"], "refused"),
    (["check", "x.__class__"], "attribute `.__class__` is not allowed"),
    (["check", "lambda: 0"], "lambda"),
    (["check", "open('f')"], "unknown function"),
    (["check", "9**9**9"], "exponent"),
    (["check", "(" * 10000 + "x" + ")" * 10000], "characters long"),
    (["check", "x*2", "--at", "y=1"], "not an input"),
    (["check", "x*2", "--at", "x=1", "--at", "x=2"], "twice"),
    (["jvp", "x*2", "--at", "x=1,2,3", "--grad", "1,2"], "(2,) but the output has shape (3,)"),
    (["check", "x*2", "--at", "x=nan"], "NaN"),
    (["check", "x*2", "--at", "x=randn(100000,100000)"], "limit"),
    (["check", "x*2", "--dtype", "float8"], "--dtype"),
    (["check", "x*2", "--device", "cuda"], "CUDA"),
    (["check", "x*2", "--device", "tpu"], "--device"),
    (["check", "x*2", "--eps", "0"], "--eps"),
    (["check", "x*2", "--shape", "a,b"], "--shape"),
    (["check", "x*2", "--arg", "n=4"], "--arg"),
    (["check", "x*2", "--init", "n=4"], "--init"),
    (["check", "examples/seed_functions.py:KillHead", "--arg", "n=os.system"], "literal"),
    (["check", "examples/seed_functions.py:Nope"], "checkable names there"),
    (["check", "examples/nope.py:F"], "no such file"),
    (["check", "x*2", "--output", "/nonexistent/dir/r.json"], "does not exist"),
    (["check", "where(x > 0, 1, 2)"], "does not depend differentiably"),
    (["check"], "Missing argument"),
    (["check", "x", "--bogus"], "No such option"),
    (["frobnicate"], "No such command"),
    (["jvp", "a*b", "--tangent", "1"], "name the tangent"),
    (["jacobian", "x*2", "--at", "x=randn(1000)"], "Jacobian has"),
])
def test_bad_usage_is_exit_2_with_one_line(capsys, args, fragment):
    code, out, err = run(capsys, *args)
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gradscope: error: ")
    assert fragment in lines[0]
    assert "Traceback" not in err


def test_user_code_raising_is_exit_3(capsys):
    code, out, err = run(capsys, "check", "examples/buggy_functions.py:MyLayer")
    assert code == 3 and out == ""
    assert "buggy_functions.py" in err and "super().__init__()" in err
    assert "gradscope/" not in err and "Traceback" not in err


def test_tangent_forward_block(capsys):
    code, out, _ = run(capsys, "jvp", "x**3", "--at", "x=1,2", "--tangent", "1,1", "--json")
    forward = json.loads(out)["forward"]
    assert code == 0 and forward["autograd"] == pytest.approx([3.0, 12.0])
    assert forward["tangent"] == {"x": [1.0, 1.0]} and forward["status"] == "ok"


def test_complex_parameters_and_unwritable_graph_outputs_are_usage_errors(capsys, tmp_path):
    for args, fragment in (
            (["check", f"{ROOT}/tests/data/targets.py:ComplexLayer", "--init", "x=1"],
             "TypeError"),
            (["check", f"{ROOT}/tests/data/targets.py:ComplexLayer"],
             "torch.complex64 tensors are not supported"),
            (["graph", "x*2", "--dot", str(tmp_path / "no" / "g.dot")], "does not exist"),
            (["sweep", "x*x", "--var", "x", "--range", "0,1", "-o", str(tmp_path)],
             "is a directory")):
        with pytest.raises(SystemExit) as done:
            main(args)
        err = capsys.readouterr().err
        assert done.value.code in (2, 3) and fragment in err, (args, err)


def test_nothing_compared_is_inconclusive_and_fails(capsys):
    target = f"{ROOT}/tests/data/targets.py:forward_raises_when_perturbed"
    code, out, _ = run(capsys, "check", target)
    assert code == 1 and "FAILED" in out and "inconclusive" in out
    assert "PASSED" not in out
    code, out, _ = run(capsys, "check", target, "--json")
    report = json.loads(out)
    assert report["inputs"][0]["status"] == "inconclusive" and not report["passed"]
    assert all(c["result"] == "not run" for c in report["upstream_checks"])
    code, _, _ = run(capsys, "check", target, "--fail-on", "never")
    assert code == 0
