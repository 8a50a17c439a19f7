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


def test_a_rank_that_raises_ends_the_check_naming_it(capsys):
    code, _, err = run(capsys, "check", f"{DATA}/parallel.py:raises_on_rank_one", "--nproc", "2")
    assert code == 3
    assert "rank 1" in err and "rank one refuses" in err and "parallel.py" in err
    assert "Traceback" not in err
    assert not children()


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


def test_a_rank_waiting_in_a_collective_is_stopped_by_timeout_with_every_rank(capsys):
    code, _, _ = run(capsys, "check", f"{DATA}/parallel.py:hangs_on_rank_zero", "--nproc",
                     "2", "--timeout", "6")
    assert code == 3
    assert not children()


def test_what_ranks_print_never_enters_the_json_on_stdout():
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "gradscope", "check",
                           f"{DATA}/parallel.py:prints_on_every_rank", "--nproc", "2",
                           "--json"], capture_output=True, text=True, timeout=120)
    assert json.loads(done.stdout)["passed"] is True
    assert "hello from rank 1" in done.stderr
