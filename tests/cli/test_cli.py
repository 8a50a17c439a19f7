"""End-to-end CLI: exit codes, one-line errors, JSON per the contract, files written atomically."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gradscope.cli import main
from gradscope.cli.output import write_atomic
from tests.command import run
from tests.paths import ROOT

SEED_ARGS = ["jvp", "3*a + 2*b*b + log(c)", "--at", "a=1,2,3", "--at", "b=3,4,5",
             "--at", "c=6,7,8", "--grad", "0.1,1,1e-4"]




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
    code, out, _ = run(capsys, "check", "sin(x) * 3", "--dtype", "float16", "--rtol", "1e-12",
                       "--atol", "0")
    assert code == 1 and "FAILED" in out and "mismatch" in out
    code, _, _ = run(capsys, "check", "sin(x) * 3", "--dtype", "float16", "--rtol", "1e-12",
                     "--atol", "0", "--fail-on", "never")
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


def test_version_and_help(capsys):
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.strip() == "gradscope 0.1.0"
    code, out, _ = run(capsys, "--help")
    assert code == 0 and "Exit codes" in out


def test_vjp_is_jvp(capsys):
    _, a, _ = run(capsys, *SEED_ARGS, "--json")
    _, b, _ = run(capsys, "vjp", *SEED_ARGS[1:], "--json")
    ja, jb = json.loads(a), json.loads(b)
    ja.pop("timings"), jb.pop("timings")
    assert ja == jb


def test_tangent_forward_block(capsys):
    code, out, _ = run(capsys, "jvp", "x**3", "--at", "x=1,2", "--tangent", "1,1", "--json")
    forward = json.loads(out)["forward"]
    assert code == 0 and forward["autograd"] == pytest.approx([3.0, 12.0])
    assert forward["tangent"] == {"x": [1.0, 1.0]} and forward["status"] == "ok"


def test_python_dash_m_and_help_does_not_import_torch(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    probe = ("import sys; from gradscope.cli import main\n"
             "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
             "print('TORCH' if 'torch' in sys.modules else 'NO-TORCH',"
             " 'SYMPY' if 'sympy' in sys.modules else 'NO-SYMPY')")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env,
                         check=True).stdout
    assert out.strip().endswith("NO-TORCH NO-SYMPY")
    done = subprocess.run([sys.executable, "-m", "gradscope", "jvp", "x*x", "--at", "x=3",
                           "--json"], capture_output=True, text=True, env=env)
    assert done.returncode == 0 and json.loads(done.stdout)["inputs"][0]["autograd"] == 6.0


def _cli(*args: str, **kw):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-m", "gradscope", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


@pytest.mark.parametrize("args, code", [
    (["check", "x*2", "--shape", "3000", "--full"], 0),
    (["check", "round(x)", "--fail-on", "warning", "--shape", "3000", "--full"], 1),
    (["check", "x*2", "--shape", "3000", "--full", "--format", "json"], 0),
])
def test_exit_code_is_the_verdict_even_when_the_reader_leaves_early(args, code):
    # `gradscope check ... | head -1`: the pipe closes after one line, with far more output
    # than a pipe buffers still to come; rich and click would turn that into exit 1
    proc = _cli(*args)
    assert proc.stdout.readline()
    proc.stdout.close()
    proc.wait(timeout=120)
    assert proc.returncode == code
    assert "Traceback" not in proc.stderr.read()


def test_console_entry_exits_with_main_codes_and_flushes_everything():
    proc = _cli("check", "log(x")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and out == ""
    assert err.strip().startswith("gradscope: error: cannot parse expression")
    proc = _cli("jvp", "x*x", "--at", "x=3", "--json")
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0 and json.loads(out)["inputs"][0]["autograd"] == 6.0


def test_ctrl_c_early_or_late_ends_quietly_with_130(tmp_path):
    import signal
    import time

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for delay in (0.2, 1.0):  # (the first ~30 ms are the interpreter's own start-up)
        proc = subprocess.Popen([sys.executable, "-m", "gradscope", "check", "x*2",
                                 "--shape", "1000"], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        if proc.returncode == 0:  # it finished before the signal: nothing to see
            continue
        assert proc.returncode == 130 and "Traceback" not in err, err


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


def test_surrogate_flag_alone_or_with_names(capsys):
    from gradscope.cli.main import with_bare_values

    assert with_bare_values(["check", "T", "--surrogate"]) == ["check", "T", "--surrogate=*"]
    assert with_bare_values(["check", "T", "--surrogate", "--seed", "1"]) == [
        "check", "T", "--surrogate=*", "--seed", "1"]
    assert with_bare_values(["check", "T", "--surrogate", "x,w"]) == [
        "check", "T", "--surrogate", "x,w"]
    assert with_bare_values(["check", "--", "--surrogate"]) == ["check", "--", "--surrogate"]
    assert with_bare_values(["check", "T", "--eval"]) == ["check", "T", "--mode=eval"]
    assert with_bare_values(["check", "T", "--train"]) == ["check", "T", "--mode=train"]
    target = f"{ROOT}/tests/data/corpus.py:grad_reverse"
    code, out, _ = run(capsys, "check", target)
    assert code == 1 and "−0.5 × the derivative" in out.replace("\n", " ")
    code, out, _ = run(capsys, "check", target, "--surrogate")
    assert code == 0 and "surrogate" in out
    code, out, _ = run(capsys, "check", target, "--surrogate", "x", "--json")
    assert code == 0 and json.loads(out)["inputs"][0]["status"] == "surrogate"
    code, _, err = run(capsys, "check", target, "--surrogate", "y")
    assert code == 2 and "--surrogate names `y`" in err and "inputs are: x" in err


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


def test_a_normal_run_prints_nothing_on_stderr():
    # no third-party warning (torch's NumPy one when NumPy is absent) reaches the user
    target = f"{ROOT}/tests/data/corpus.py:spike"
    done = subprocess.run([sys.executable, "-m", "gradscope", "check", target, "--json"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0 and done.stderr == ""
    assert json.loads(done.stdout)["inputs"][0]["status"] == "surrogate"


def test_the_command_leaves_like_a_python_program(tmp_path):
    # atexit handlers of the user's code (coverage data!) run: no os._exit
    marker = tmp_path / "atexit"
    env = dict(os.environ, PYTHONPATH=str(ROOT), GRADSCOPE_TEST_ATEXIT=str(marker))
    done = subprocess.run([sys.executable, "-c", "from gradscope._launch import entry; entry()",
                           "check", f"{ROOT}/tests/data/leaves_a_trace.py:f"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert marker.read_text() == "ran"


@pytest.mark.parametrize("args, words", [
    (["--seed", "abc"], "'--seed': not a whole number"),
    (["--eps", "abc"], "'--eps': not a number"),
    (["--max-elements", "0"], "'--max-elements': must be at least 1"),
    (["--order", "3"], "'--order': must be at most 2"),
])
def test_usage_errors_are_in_our_words(capsys, args, words):
    code, _, err = run(capsys, "check", "x*2", *args)
    assert code == 2 and words in err and "Input should" not in err


def test_no_private_typer_api():
    source = (ROOT / "gradscope" / "cli" / "main.py").read_text()
    assert "typer._click" not in source and "import click" not in source


@pytest.mark.parametrize("args", [
    ["check", "-x**2", "--at", "x=1,2"], ["vjp", "-sin(x)", "--at", "x=1,2"],
    ["check", "--at", "x=1,2", "-x*3"], ["jacobian", "-x", "--at", "x=1,2"],
])
def test_a_target_starting_with_a_minus_needs_no_double_dash(capsys, args):
    code, out, err = run(capsys, *args)
    assert code == 0, err
    assert "PASSED" in out


def test_an_option_value_starting_with_a_minus_stays_a_value(capsys):
    code, out, err = run(capsys, "jvp", "x*2", "--at", "x=1,2", "--grad", "-1,3")
    assert code == 0, err
    assert "-2" in out
