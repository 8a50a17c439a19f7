"""A run told to stop, stops: SIGTERM and SIGINT end `check`, `run` (with its workers) and a
`pytest --gradscope` session within 2 s, with the signal's exit code, one line saying so, no
report file (whole or half) and no process left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.paths import ROOT

SLOW = f"{ROOT}/tests/data/hostile.py:slow"
PROMPT = 2.0  # seconds from the signal to the exit


def _start(args: list[str], cwd: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CI": ""}
    return subprocess.Popen([sys.executable, *args], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _children(pid: int) -> list[int]:
    """Direct children of `pid` (from /proc: no psutil needed)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def _gone(pid: int, within: float = 2.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state == "Z":  # reaped by init shortly
            return True
        time.sleep(0.05)
    return False


def _stop(proc: subprocess.Popen, sig: int, started: str, wait: float = 60.0
          ) -> tuple[float, str, str]:
    """Wait until `started` shows the work is under way, send `sig`; (seconds to exit,
    stdout, stderr)."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and not _under_way(proc, started):
        time.sleep(0.1)
    assert proc.poll() is None, "finished before it could be stopped"
    sent = time.monotonic()
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    return time.monotonic() - sent, out, err


def _under_way(proc: subprocess.Popen, what: str) -> bool:
    if what == "workers":
        return len(_children(proc.pid)) >= 2
    time.sleep(float(what))
    return True


@pytest.mark.parametrize("sig, code, name", [(signal.SIGTERM, 143, "SIGTERM"),
                                             (signal.SIGINT, 130, "SIGINT")])
@pytest.mark.slow
def test_check_stops_promptly_and_writes_nothing(tmp_path, sig, code, name):
    proc = _start(["-m", "gradscope", "check", SLOW, "--shape", "x=3000", "-o", "report.json"],
                  tmp_path)
    took, out, err = _stop(proc, sig, "4")
    assert proc.returncode == code and took < PROMPT, (took, err)
    assert err.strip() == f"gradscope: stopped by {name} before the run finished (exit {code})"
    assert "inconclusive" not in out + err and "target" not in err  # never the target's doing
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_check_timeout_ends_the_check_the_same_way(tmp_path):
    started = time.monotonic()
    proc = _start(["-m", "gradscope", "check", SLOW, "--shape", "x=3000", "-o", "report.json",
                   "--timeout", "3"], tmp_path)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 3 and time.monotonic() - started < 3 + 8  # (start-up included)
    assert "did not finish within --timeout 3 s" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_run_stops_its_workers_too(tmp_path):
    config = tmp_path / "gradscope.toml"
    config.write_text("[tool.gradscope]\n" + "".join(
        f'[[tool.gradscope.checks]]\nname = "slow-{k}"\ntarget = "{SLOW}"\n'
        f'shape = {{x = "3000"}}\n' for k in range(2)))
    proc = _start(["-m", "gradscope", "run", str(config), "-j", "2", "-o", "out.json",
                   "--junit-xml", "junit.xml"], tmp_path)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(_children(proc.pid)) < 2:
        time.sleep(0.1)
    workers = _children(proc.pid)
    time.sleep(3)  # the workers are running their checks
    took, _, err = _stop(proc, signal.SIGTERM, "0")
    assert proc.returncode == 143 and took < PROMPT, (took, err)
    assert "stopped by SIGTERM" in err
    assert workers and all(_gone(pid) for pid in workers)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gradscope.toml"]


@pytest.mark.slow
def test_pytest_with_the_switch_stops_and_leaves_nothing(tmp_path):
    proc = _start(["-m", "pytest", "-q", "-p", "no:cacheprovider", "--gradscope",
                   str(ROOT / "tests/data/slow_suite")], tmp_path)
    took, _, _ = _stop(proc, signal.SIGTERM, "5")
    # pytest installs no SIGTERM handler: it ends by the signal, as without gradscope
    assert proc.returncode in (-signal.SIGTERM, 143) and took < PROMPT
    assert _children(proc.pid) == [] and list(tmp_path.iterdir()) == []
