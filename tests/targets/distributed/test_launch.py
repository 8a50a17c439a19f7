"""Ranks started and ended: a rank that raises ends the check on every rank (exit 3 naming the
rank and the user's frames), and no process outlives it."""

from __future__ import annotations

import pytest

from gradscope.errors import UsageError
from gradscope.options import Options
from gradscope.targets.distributed.launch import Ranks, free_port
from gradscope.targets.distributed.rank import RankSpec
from tests.command import run
from tests.paths import DATA
from tests.targets.distributed.checked import children


@pytest.mark.slow
def test_a_rank_that_raises_ends_the_check_naming_it(capsys):
    code, _, err = run(capsys, "check", f"{DATA}/parallel.py:raises_on_rank_one", "--nproc", "2")
    assert code == 3
    assert "rank 1" in err and "rank one refuses" in err and "parallel.py" in err
    assert "Traceback" not in err
    assert not children()


@pytest.mark.slow
def test_a_planted_bug_exits_1_from_the_command_line(capsys):
    code, out, _ = run(capsys, "check", f"{DATA}/parallel.py:MLPAveragesGradient", "--nproc",
                       "2")
    assert code == 1 and "0.5 × the derivative" in out


def test_free_ports_are_on_the_loopback_and_numbers():
    assert 0 < free_port() < 65536


def test_a_world_beyond_the_limit_is_refused_before_any_process_starts():
    spec = RankSpec("x", None, Options(), 17, free_port(), 1.0)
    with pytest.raises(UsageError, match="from 1 to 16"):
        Ranks(spec)
    assert not children()


@pytest.mark.slow
def test_a_rank_waiting_in_a_collective_is_stopped_by_timeout_with_every_rank(capsys):
    code, _, _ = run(capsys, "check", f"{DATA}/parallel.py:hangs_on_rank_zero", "--nproc",
                     "2", "--timeout", "6")
    assert code == 3
    assert not children()


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

    def stopped_while_waiting(self, seconds, expected):
        assert len(self.processes) == 2 and all(p.poll() is None for p in self.processes)
        raise TimedOut(6.0)

    monkeypatch.setattr(launch.Ranks, "_replies", stopped_while_waiting)
    spec = RankSpec(f"{DATA}/parallel.py:prints_on_every_rank", None, Options(nproc=2), 2,
                    free_port(), 1.0)
    with pytest.raises(TimedOut):
        Ranks(spec)
    assert not children()
    code, _, _ = run(capsys, "check", f"{DATA}/parallel.py:prints_on_every_rank",
                     "--nproc", "2", "--timeout", "0.2")
    assert code == 3 and not children()  # (errors.TimedOut: the entry says it in one line)


@pytest.mark.slow
def test_what_a_rank_forks_is_ended_with_it(capsys, tmp_path, monkeypatch):
    import time

    listed = tmp_path / "sleepers"
    monkeypatch.setenv("GRADSCOPE_TEST_SLEEPERS", str(listed))
    code, _, _ = run(capsys, "check", f"{DATA}/parallel.py:forks_a_sleeper", "--nproc", "2")
    assert code == 0 and not children()
    pids = [int(p) for p in listed.read_text().split()]
    assert len(pids) == 2
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    assert not any(_alive(p) for p in pids)


def _alive(pid: int) -> bool:
    from pathlib import Path

    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _orphaned_ranks() -> list[int]:
    """Rank processes whose coordinator is gone (its pid is their last argument)."""
    from pathlib import Path

    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            stat = (proc / "stat").read_text().split(")")[-1].split()
        except OSError:
            continue
        if any(b"die_with_parent" in a for a in argv) and stat[0] != "Z":
            given = argv[-2] if argv[-1] == b"" else argv[-1]
            if given.isdigit() and int(stat[1]) != int(given):
                found.append(int(proc.name))
    return found


@pytest.mark.slow
def test_a_run_whose_distributed_check_times_out_leaves_no_rank(tmp_path, capsys):
    import time

    config = tmp_path / "gradscope.toml"
    config.write_text("[tool.gradscope]\n[[tool.gradscope.checks]]\nname = \"hangs\"\n"
                      f"target = \"{DATA}/parallel.py:sleeps_on_every_rank\"\nnproc = 2\n"
                      "timeout = 10\n")
    code, _, _ = run(capsys, "run", str(config), "--jobs", "1")
    assert code != 0
    deadline = time.monotonic() + 10  # (a killed parent's death signal takes a moment)
    while _orphaned_ranks() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _orphaned_ranks()
    assert not children()


@pytest.mark.slow
@pytest.mark.parametrize("name, said", [("writes_a_huge_header", "a message header of"),
                                        ("writes_garbage", "bytes that are no message")])
def test_a_rank_that_writes_into_its_channel_ends_the_check_at_once(capsys, name, said):
    # a header of 2^62 bytes then a stall hung the coordinator forever; a flood was buffered
    # without bound: now refused before anything is buffered, in one line, exit 3
    import time

    started = time.monotonic()
    code, _, err = run(capsys, "check", f"{DATA}/parallel.py:{name}", "--nproc", "2")
    assert code == 3 and said in err and "wrote into its channel" in err
    assert time.monotonic() - started < 40 and not children()


@pytest.mark.slow
def test_a_distributed_check_inside_a_rank_is_refused_in_one_line(capsys):
    code, _, err = run(capsys, "check", f"{DATA}/nested_nproc.py:doubled", "--nproc", "2")
    assert code == 2 and "cannot start ranks of its own" in err
    assert "Traceback" not in err and not children()
