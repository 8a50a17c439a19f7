"""The console entry: exit codes decided once everything is written, a reader that leaves early,
Ctrl-C and interpreter teardown, typer's words in ours, arguments that start with a minus."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.command import run
from tests.paths import ROOT


@pytest.mark.slow
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
@pytest.mark.slow
def test_exit_code_is_the_verdict_even_when_the_reader_leaves_early(args, code):
    # `gradscope check ... | head -1`: the pipe closes after one line, with far more output
    # than a pipe buffers still to come; rich and click would turn that into exit 1
    proc = _cli(*args)
    assert proc.stdout.readline()
    proc.stdout.close()
    proc.wait(timeout=120)
    assert proc.returncode == code
    assert "Traceback" not in proc.stderr.read()


@pytest.mark.slow
def test_console_entry_exits_with_main_codes_and_flushes_everything():
    proc = _cli("check", "log(x")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and out == ""
    assert err.strip().startswith("gradscope: error: cannot parse expression")
    proc = _cli("jvp", "x*x", "--at", "x=3", "--json")
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0 and json.loads(out)["inputs"][0]["autograd"] == 6.0


@pytest.mark.slow
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


@pytest.mark.slow
def test_a_normal_run_prints_nothing_on_stderr():
    # no third-party warning (torch's NumPy one when NumPy is absent) reaches the user
    target = f"{ROOT}/tests/data/corpus.py:spike"
    done = subprocess.run([sys.executable, "-m", "gradscope", "check", target, "--json"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0 and done.stderr == ""
    # the spike's jump at 0 (an exact zero among the default inputs) is not compared; far
    # from it the surrogate is below what float32 resolves
    counts = json.loads(done.stdout)["inputs"][0]["status_counts"]
    assert counts["surrogate"] > 12 and counts["nondifferentiable"] == 1


@pytest.mark.slow
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


@pytest.mark.slow
def test_an_environment_torch_refuses_to_import_in_is_exit_2_naming_it():
    # (TORCH_LOGS naming no log: `import torch` itself raises; exit 4 before)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TORCH_LOGS": "nonsense"}
    for args in (["check", "x*2", "--shape", "x=3"], ["ops"], ["graph", "sin(x)"]):
        done = subprocess.run([sys.executable, "-m", "gradscope", *args], env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 2, done.stderr[-500:]
        assert "torch cannot be imported in this environment: Invalid log settings" \
            in done.stderr


@pytest.mark.slow
def test_what_a_graphs_target_prints_is_kept_off_stdout_and_shown_escaped(tmp_path):
    noisy = tmp_path / "noisy.py"
    noisy.write_text("print('\\x1b[31m<b>noise</b>')\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "gradscope", "graph", "sin(x)", "--import",
                           str(noisy), "--shape", "x=3", "--format", "json"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "\x1b" not in done.stdout + done.stderr
    assert done.stdout.lstrip().startswith("{") and "noise" in done.stderr


def test_torchs_numpy_note_is_not_what_a_fresh_install_ends_on(monkeypatch):
    # torch's CPU wheel without numpy warns when a module of its own loads late (the README's
    # set-up ended on it); any other warning of torch's is still said
    import warnings

    from gradscope.cli.main import _torch_warnings

    shown: list[str] = []
    monkeypatch.setattr(warnings, "showwarning", lambda message, *_: shown.append(str(message)))
    torch_file = "/venv/site-packages/torch/_subclasses/functional_tensor.py"
    with _torch_warnings():
        warnings.warn_explicit("Failed to initialize NumPy: No module named 'numpy'",
                               UserWarning, torch_file, 368)
        warnings.warn_explicit("something else", UserWarning, torch_file, 369)
    assert shown == ["something else"]
