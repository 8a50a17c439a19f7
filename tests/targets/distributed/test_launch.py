"""Ranks started through torch's elastic launch and ended: a rank that raises or dies ends the
check on every rank (exit 3 naming the rank and the user's frames), --timeout and a killed
launcher end every rank, and no process of a launch outlives it — what a rank forks, a child
in a session of its own."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gradscope.errors import UsageError
from tests.command import run
from tests.paths import DATA
from tests.targets.distributed.checked import children


def leftover() -> list[int]:
    """Processes of a launch still alive anywhere (their environment carries its tag)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes()
            argv = (proc / "cmdline").read_bytes()
            state = (proc / "stat").read_text().split(")")[-1].split()[0]
        except OSError:
            continue
        if (b"GRADSCOPE_RANK_OF=" in environ or b"gradscope-ranks-" in argv) and state != "Z":
            found.append(int(proc.name))
    return found


def none_left(seconds: float = 10.0) -> bool:
    """No process of a launch alive within `seconds` (a killed parent's death signal, the
    kernel's reaping, take a moment)."""
    deadline = time.monotonic() + seconds
    while (leftover() or children()) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [(p, Path(f"/proc/{p}/cmdline").read_bytes()[:120]) for p in leftover()]
    assert not left and not children(), (left, children())
    return True


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
def test_a_rank_that_raises_ends_the_check_naming_it(capsys):
    code, _, err = run(capsys, "check", f"{DATA}/parallel.py:raises_on_rank_one", "--nproc", "2")
    assert code == 3
    assert "rank 1" in err and "rank one refuses" in err and "parallel.py" in err
    assert "Traceback" not in err
    assert none_left()


@pytest.mark.slow
def test_a_rank_killed_outright_ends_the_check_naming_it(capsys):
    started = time.monotonic()
    code, _, err = run(capsys, "check", f"{DATA}/parallel.py:dies_on_rank_one", "--nproc", "2")
    assert code == 3 and "rank 1" in err and "Traceback" not in err
    assert time.monotonic() - started < 60 and none_left()


@pytest.mark.slow
def test_a_planted_bug_exits_1_from_the_command_line(capsys):
    code, out, _ = run(capsys, "check", f"{DATA}/parallel.py:MLPAveragesGradient", "--nproc",
                       "2")
    assert code == 1 and "0.5 × the derivative" in out
    assert "started by torch's elastic launch" in out


def test_a_world_beyond_the_limit_is_refused_before_any_process_starts():
    from gradscope.targets.distributed.launch import launched

    with pytest.raises(UsageError, match=r"from 1 to 16.*torchrun"):
        launched(("check", None), 17)
    assert not children()


@pytest.mark.slow
def test_a_rank_waiting_in_a_collective_is_stopped_by_timeout_with_every_rank(capsys):
    code, _, _ = run(capsys, "check", f"{DATA}/parallel.py:hangs_on_rank_zero", "--nproc",
                     "2", "--timeout", "6")
    assert code == 3
    assert none_left()


@pytest.mark.slow
def test_what_ranks_print_never_enters_the_json_on_stdout():
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "gradscope", "check",
                           f"{DATA}/parallel.py:prints_on_every_rank", "--nproc", "2",
                           "--json"], capture_output=True, text=True, timeout=120)
    assert json.loads(done.stdout)["passed"] is True
    assert "hello from rank 1" in done.stderr


@pytest.mark.slow
def test_a_timeout_while_the_ranks_start_ends_every_rank(capsys, monkeypatch):
    # on a loaded machine a short limit lands while the ranks still import torch: they were
    # left waiting there, and every later "no child left" test failed in a chain
    from gradscope.errors import TimedOut
    from gradscope.targets.distributed import launch

    def stopped_while_starting(self):
        deadline = time.monotonic() + 60
        while len(leftover()) < 2 and time.monotonic() < deadline:  # the two ranks
            time.sleep(0.05)
        assert len(leftover()) >= 2
        raise TimedOut(6.0)

    monkeypatch.setattr(launch.Agent, "wait", stopped_while_starting)
    with pytest.raises(TimedOut):
        launch.launched(("check", None), 2)
    assert none_left()
    monkeypatch.undo()
    code, _, _ = run(capsys, "check", f"{DATA}/parallel.py:prints_on_every_rank",
                     "--nproc", "2", "--timeout", "0.2")
    assert code == 3 and none_left()  # (errors.TimedOut: the entry says it in one line)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["forks_a_sleeper", "starts_a_session"])
def test_what_a_rank_starts_is_ended_with_it(capsys, tmp_path, monkeypatch, name):
    listed = tmp_path / "sleepers"
    monkeypatch.setenv("GRADSCOPE_TEST_SLEEPERS", str(listed))
    code, _, _ = run(capsys, "check", f"{DATA}/parallel.py:{name}", "--nproc", "2")
    assert code == 0
    pids = [int(p) for p in listed.read_text().split()]
    assert len(pids) == 2
    assert none_left()
    assert not any(_alive(p) for p in pids)


@pytest.mark.slow
def test_a_run_whose_distributed_check_times_out_leaves_no_rank(tmp_path, capsys):
    config = tmp_path / "gradscope.toml"
    config.write_text("[tool.gradscope]\n[[tool.gradscope.checks]]\nname = \"hangs\"\n"
                      f"target = \"{DATA}/parallel.py:sleeps_on_every_rank\"\nnproc = 2\n"
                      "timeout = 10\n")
    code, _, _ = run(capsys, "run", str(config), "--jobs", "1")
    assert code != 0
    assert none_left(20.0)


@pytest.mark.slow
def test_a_distributed_check_inside_a_rank_is_refused_in_one_line(capsys):
    code, _, err = run(capsys, "check", f"{DATA}/nested_nproc.py:doubled", "--nproc", "2")
    assert code == 2 and "cannot start ranks of its own" in err
    assert "Traceback" not in err and none_left()
