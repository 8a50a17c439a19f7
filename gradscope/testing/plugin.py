"""pytest plugin (entry point `gradscope`): the fixture `assert_gradients`, and the switch that
routes a suite's `torch.autograd.gradcheck`/`gradgradcheck` calls through gradscope's drop-in:
`pytest --gradscope`, `gradscope = true` under [pytest] ini options, or GRADSCOPE_GRADCHECK=1.
torch is imported only when the switch is on."""

from __future__ import annotations

import os
from typing import Any

import pytest

ENV = "GRADSCOPE_GRADCHECK"


@pytest.fixture
def assert_gradients():
    """`assert_gradients(fn, *inputs, grad=None, atol=None, rtol=None, **options)`."""
    from gradscope.testing.assertions import assert_gradients as helper

    return helper


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("gradscope")
    group.addoption("--gradscope", action="store_true", default=False,
                    help="route torch.autograd.gradcheck/gradgradcheck through gradscope's "
                         "drop-in (failures explained per element)")
    parser.addini("gradscope", type="bool", default=False,
                  help="as --gradscope: route gradcheck calls through gradscope")
    group.addoption("--gradscope-strict", action="store_true", default=False,
                    help="with --gradscope: fail what gradscope's own tighter check finds "
                         "inside a call's tolerances (otherwise a GradscopeWarning)")
    parser.addini("gradscope_strict", type="bool", default=False,
                  help="as --gradscope-strict")


def _enabled(config: Any) -> bool:
    env = os.environ.get(ENV, "").strip().lower() in ("1", "true", "yes", "on")
    return bool(config.getoption("gradscope") or config.getini("gradscope") or env)


def pytest_configure(config: Any) -> None:
    if _enabled(config):
        from gradscope.testing import switch

        switch.install()
        config.stash[_SWITCHED] = True
        if config.getoption("gradscope_strict") or config.getini("gradscope_strict"):
            from gradscope.testing.judging import Settings

            Settings.strict = True


def pytest_unconfigure(config: Any) -> None:
    if config.stash.get(_SWITCHED, False):
        from gradscope.testing import switch
        from gradscope.testing.judging import Settings

        switch.uninstall()
        Settings.strict = False


@pytest.hookimpl(hookwrapper=True)  # (the old-style wrapper: pytest 7 too)
def pytest_runtest_call(item: Any) -> Any:
    """Which test the drop-in's calls come from: the summary counts tests as pytest does."""
    from gradscope.testing.stats import STATS

    STATS.current = item.nodeid if item.config.stash.get(_SWITCHED, False) else ""
    try:
        outcome = yield
        if outcome.excinfo is None:  # (the test passed: a False it expected failed nothing)
            STATS.failed_tests.pop(item.nodeid, None)
    finally:
        STATS.current = ""


def pytest_sessionfinish(session: Any) -> None:
    """A pytest-xdist worker hands its counts to the controller, which prints the summary."""
    config = session.config
    if config.stash.get(_SWITCHED, False) and hasattr(config, "workeroutput"):
        from dataclasses import asdict

        from gradscope.testing.stats import STATS

        config.workeroutput["gradscope_drop_in"] = asdict(STATS)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """xdist's controller: add up what each worker counted."""
    counted = getattr(node, "workeroutput", {}).get("gradscope_drop_in")
    if counted:
        from gradscope.testing.stats import STATS

        STATS.add(counted)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: Any) -> None:
    if not config.stash.get(_SWITCHED, False):
        return
    from gradscope.testing.switch import summary

    terminalreporter.write_sep("-", "gradscope")
    terminalreporter.write_line(summary())


_SWITCHED = pytest.StashKey[bool]()
