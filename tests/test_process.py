"""The process's exit status is gradscope's: the user's code leaving through os._exit, an atexit
handler asking for 0, a fork whose child returns into gradscope, BaseExceptions of its own; and
a deadline that stops a check like a signal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from gradscope import process
from gradscope.errors import TimedOut
from tests.paths import ROOT

HOSTILE = f"{ROOT}/tests/data/hostile.py"


def _gradscope(*args: str, env: dict | None = None, cwd: str | None = None
               ) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-m", "gradscope", *args], capture_output=True,
                          text=True, env=environment, cwd=cwd, timeout=300)


@pytest.mark.slow
def test_os_exit_in_the_forward_is_the_target_leaving():
    done = _gradscope("check", f"{HOSTILE}:hard_exit", "--shape", "x=3")
    assert done.returncode == 3
    assert "os._exit: 0" in done.stderr and "hint: the target called os._exit()" in done.stderr


@pytest.mark.slow
def test_an_atexit_handler_of_the_target_cannot_turn_a_failure_into_0():
    done = _gradscope("check", f"{HOSTILE}:exits_at_exit", "--shape", "x=3")
    assert done.returncode == 1 and "FAILED" in done.stdout


@pytest.mark.slow
def test_a_forked_child_returning_into_gradscope_ends_there():
    # the parent's function is checked, once: one JSON document, no second report
    done = _gradscope("check", f"{HOSTILE}:forks", "--shape", "x=3", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["passed"] and report["inputs"][0]["autograd"] == [2.0, 2.0, 2.0]


@pytest.mark.slow
def test_a_base_exception_of_the_users_is_theirs_in_one_message():
    done = _gradscope("check", f"{HOSTILE}:raises_base_exception", "--shape", "x=3")
    assert done.returncode == 3 and "OwnBaseException: not an Exception" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_writes_to_fd_1_never_reach_the_json_document():
    done = _gradscope("check", f"{HOSTILE}:writes_fd_1", "--shape", "x=3", "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["passed"]
    assert "written to fd 1" in done.stderr  # said, where it does no harm


@pytest.mark.slow
def test_a_targets_chdir_does_not_move_the_output(tmp_path):
    done = _gradscope("check", f"{HOSTILE}:changes_directory", "--shape", "x=3", "-o",
                      "report.json", "--format", "json", cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "report.json").read_text())["passed"]


@pytest.mark.slow
def test_an_ascii_stdout_and_a_lone_surrogate_keep_the_verdict():
    for fmt in ("table", "json"):
        done = _gradscope("check", f"{HOSTILE}:prints_lone_surrogate", "--shape", "x=3",
                          "--format", fmt, env={"PYTHONIOENCODING": "ascii"})
        assert done.returncode == 1 and "internal error" not in done.stderr
    assert json.loads(done.stdout)["passed"] is False


@pytest.mark.parametrize("name, words", [
    ("empty_output", "is empty (shape (0,)): there is no gradient to compare"),
    ("sparse_output", "layout torch.sparse_coo"),
    ("meta_output", "meta device"),
])
@pytest.mark.slow
def test_outputs_with_nothing_to_compare_are_refused(name, words):
    done = _gradscope("check", f"{HOSTILE}:{name}", "--shape", "x=3")
    assert done.returncode == 2 and words in done.stderr, done.stderr


def test_the_deadline_stops_like_a_signal_and_is_lifted_after():
    started = time.monotonic()
    with pytest.raises(TimedOut) as info, process.deadline(0.2):
        while True:
            pass
    assert time.monotonic() - started < 2 and info.value.code == 3
    assert "--timeout 0.2 s" in info.value.reason()
    with process.deadline(0.05):
        pass
    time.sleep(0.1)  # lifted: nothing fires later


def test_the_guard_is_only_installed_by_the_command():
    assert os._exit is process._real_exit  # importing gradscope changes nothing
    assert process.decided() is None


@pytest.mark.slow
@pytest.mark.parametrize("command", ["check", "run"])
def test_a_failing_check_fails_with_assertions_stripped(tmp_path, command):
    # PYTHONOPTIMIZE=1 removes `assert`: no verdict may rest on one
    wrong = f"{ROOT}/tests/data/rejecting.py:wrong_probability"
    if command == "check":
        args = ["check", wrong, "--at", "p=0.5,0.75"]
    else:
        config = tmp_path / "gradscope.toml"
        config.write_text(f'[[tool.gradscope.checks]]\nname = "wrong"\ntarget = "{wrong}"\n'
                          'at = {p = "0.5,0.75"}\n')
        args = ["run", str(config), "--jobs", "1"]
    done = _gradscope(*args, env={"PYTHONOPTIMIZE": "1"})
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAILED" in done.stdout or "failed" in done.stdout


def test_deep_raises_the_recursion_limit_while_inside_and_restores_it():
    import sys

    from gradscope import process

    before = sys.getrecursionlimit()
    with process.deep():
        assert sys.getrecursionlimit() >= process.DEEP_FRAMES
    assert sys.getrecursionlimit() == before


@pytest.mark.slow
def test_an_expression_nested_199_levels_is_checked_not_an_internal_error():
    # (the limits are 2,000 characters and 200 levels; 199 `sin(` ended in a RecursionError)
    import gradscope

    expression = "sin(" * 199 + "x" + ")" * 199
    assert len(expression) <= 2000
    assert gradscope.check(expression, x="0.5").passed


def test_a_cpu_budget_is_a_wall_clock_one_too_so_a_loaded_machine_waits_no_longer():
    import time

    import pytest

    from gradscope import process

    class Over(Exception):
        pass

    def over() -> None:
        raise Over

    tic = time.perf_counter()
    with pytest.raises(Over), process.cpu_budget(0.3, over):
        time.sleep(30)  # (no CPU time spent: only the clock can stop it)
    assert time.perf_counter() - tic < 10


@pytest.mark.slow
def test_nested_gelu_sixteen_deep_is_bounded_by_the_symbolic_budget():
    # (33 syntax nodes; one derivative of it does not return: the budget stops it, the other
    # two engines give the verdict)
    import time

    import gradscope
    from gradscope.engines.symbolic import BUDGET_S

    tic = time.perf_counter()
    report = gradscope.check("gelu(" * 16 + "x" + ")" * 16, x="0.5,1")
    assert report.passed
    assert time.perf_counter() - tic < process_bound(BUDGET_S)


def process_bound(budget: float) -> float:
    from gradscope import process

    return process.WALL_FACTOR * budget + 20  # (the rest of the check, on a loaded machine)


def test_a_stop_inside_a_shielded_stretch_is_raised_as_it_ends():
    # a --timeout landing between a rank's fork and its record (or inside the ranks' grace
    # period) would leave processes nobody ends: it waits for the stretch to end
    finished = []
    with pytest.raises(TimedOut), process.deadline(0.05):
        with process.shielded():
            time.sleep(0.3)
            finished.append("the stretch")
        finished.append("after it")
    assert finished == ["the stretch"]
