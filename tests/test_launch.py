"""The console script: SIGTERM unwinds as gradscope's own stop (exit 143, never taken for the
user's code leaving), and the exit code the CLI decided is the one the process leaves with."""

from __future__ import annotations

import signal

import pytest

from gradscope import _launch
from gradscope.errors import Stopped


def test_sigterm_is_gradscopes_own_stop():
    with pytest.raises(Stopped) as info:
        _launch._terminate(signal.SIGTERM, None)
    assert info.value.code == 128 + signal.SIGTERM


def test_leaving_quickly_only_once_the_cli_decided(monkeypatch):
    import sys

    monkeypatch.delitem(sys.modules, "gradscope.cli.main", raising=False)
    assert _launch._leave_quickly() is None  # not decided by the CLI: the normal way
