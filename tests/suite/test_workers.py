"""Checks run in worker processes: a target that exits, crashes or hangs fails its own check
and the others still run, in config order; a failing check keeps the suite red."""

from __future__ import annotations

import json

import pytest

from gradscope.cli import main
from gradscope.suite.run import run_config
from tests.paths import DATA

HOSTILE = f"{DATA}/hostile.py"


def _config(tmp_path, *checks: str, top: str = "") -> str:
    body = "[tool.gradscope]\n" + top + "".join(
        f'[[tool.gradscope.checks]]\n{c}\n' for c in checks)
    path = tmp_path / "gradscope.toml"
    path.write_text(body)
    return str(path)


@pytest.mark.slow
def test_exit_crash_and_hang_fail_their_own_check_and_the_rest_run(tmp_path):
    config = _config(
        tmp_path,
        f'name = "exit"\ntarget = "{HOSTILE}:exits"',
        f'name = "hard-exit"\ntarget = "{HOSTILE}:hard_exit"',
        f'name = "segfault"\ntarget = "{HOSTILE}:segfault"',
        f'name = "hang"\ntarget = "{HOSTILE}:hangs"\ntimeout = 4',
        f'name = "fine"\ntarget = "{HOSTILE}:square"',
    )
    suite = run_config(config, jobs=2)
    outcomes = {r.name: (r.outcome, r.crashed) for r in suite.results}
    assert [r.name for r in suite.results] == ["exit", "hard-exit", "segfault", "hang", "fine"]
    # os._exit in a worker is the target leaving (its frames shown), like sys.exit
    assert outcomes == {"exit": ("raised", False), "hard-exit": ("raised", False),
                        "segfault": ("error", True), "hang": ("error", True),
                        "fine": ("passed", False)}
    errors = {r.name: r.error for r in suite.results}
    assert "SystemExit: 0" in errors["exit"] and "SIGSEGV" in errors["segfault"]
    assert "os._exit: 0" in errors["hard-exit"] and "timeout of 4 s" in errors["hang"]
    assert suite.exit_code == 3


@pytest.mark.slow
def test_an_exiting_target_never_turns_a_failing_suite_green(tmp_path, capsys):
    config = _config(
        tmp_path,
        'name = "wrong"\ntarget = "round(x) * x"\nat = {x = "0.3"}\nfail_on = "warning"',
        f'name = "exit"\ntarget = "{HOSTILE}:exits"')
    with pytest.raises(SystemExit) as done:
        main(["run", config, "--json"])
    assert done.value.code == 3
    data = json.loads(capsys.readouterr().out)
    assert [c["outcome"] for c in data["checks"]] == ["failed", "raised"]


@pytest.mark.slow
def test_prints_stay_out_of_the_json_and_in_the_report(tmp_path, capsys):
    config = _config(tmp_path, f'name = "noisy"\ntarget = "{HOSTILE}:prints"\nat = {{x = "1,2"}}')
    with pytest.raises(SystemExit) as done:
        main(["run", config, "--json", "--jobs", "1"])
    assert done.value.code == 0
    data = json.loads(capsys.readouterr().out)
    assert data["checks"][0]["report"]["user_output"].startswith("noise on stdout")


def test_select_and_shard(tmp_path):
    checks = [f'name = "c{k}"\ntarget = "x * {k}"' for k in range(1, 6)]
    config = _config(tmp_path, *checks)
    names = [r.name for r in run_config(config, pattern="c[24]", isolate=False).results]
    assert names == ["c2", "c4"]
    first = [r.name for r in run_config(config, shard_of="1/2", isolate=False).results]
    second = [r.name for r in run_config(config, shard_of="2/2", isolate=False).results]
    assert first == ["c1", "c3", "c5"] and second == ["c2", "c4"]


@pytest.mark.slow
def test_recursion_allocation_and_stray_threads_stay_in_their_checks(tmp_path):
    config = _config(
        tmp_path,
        f'name = "recursion"\ntarget = "{HOSTILE}:recurses"',
        f'name = "allocation"\ntarget = "{HOSTILE}:allocates"',
        f'name = "thread"\ntarget = "{HOSTILE}:leaves_a_thread"\ntimeout = 60',
        f'name = "fine"\ntarget = "{HOSTILE}:square"',
        top="memory_limit = 4096\n")
    suite = run_config(config, jobs=1)
    outcomes = {r.name: r.outcome for r in suite.results}
    assert outcomes["recursion"] == "raised" and "RecursionError" in suite.results[0].error
    assert outcomes["allocation"] in ("raised", "error")  # refused by the 4 GB limit
    assert outcomes["thread"] == "passed" and outcomes["fine"] == "passed"


@pytest.mark.slow
def test_the_cli_lists_every_error_before_any_check_runs(tmp_path, capsys):
    config = _config(tmp_path, 'name = "one"\ntarget = "x +"',
                     f'name = "would-run"\ntarget = "{HOSTILE}:exits"',
                     'name = "two"\ntarget = "x"\nrtoll = 1')
    with pytest.raises(SystemExit) as done:
        main(["run", config, "--jobs", "1"])
    err = capsys.readouterr().err
    assert done.value.code == 2 and "2 errors" in err
    assert err.index("check #1 (one)") < err.index("check #3 (two)")


@pytest.mark.slow
def test_a_target_writing_into_inherited_descriptors_loses_its_check_never_the_report(tmp_path):
    # (a huge length read as a message's: exit 4 with no report before; a half message: the
    # run waited forever; a target reading stdin took the worker's next job)
    config = _config(
        tmp_path,
        f'name = "scribbles"\ntarget = "{HOSTILE}:scribbles"',
        f'name = "half"\ntarget = "{HOSTILE}:half_message"\ntimeout = 4',
        f'name = "stdin"\ntarget = "{HOSTILE}:reads_stdin"',
        f'name = "fine"\ntarget = "{HOSTILE}:square"',
    )
    suite = run_config(config, jobs=1)
    outcomes = {r.name: r.outcome for r in suite.results}
    assert outcomes == {"scribbles": "error", "half": "error", "stdin": "passed",
                        "fine": "passed"}
    errors = {r.name: r.error for r in suite.results}
    assert "wrote into the channel" in errors["scribbles"] and "timeout" in errors["half"]
