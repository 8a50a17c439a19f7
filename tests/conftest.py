"""Shared test helpers."""

from __future__ import annotations

import os

import torch
from hypothesis import settings


def assert_close(actual, expected, rel: float = 1e-8, abs_: float = 1e-12) -> None:
    """Nested lists (or numbers) equal in shape and close in value."""
    a = torch.tensor(actual, dtype=torch.float64)
    e = torch.tensor(expected, dtype=torch.float64)
    assert a.shape == e.shape, f"shape {tuple(a.shape)} != {tuple(e.shape)}"
    assert torch.allclose(a, e, rtol=rel, atol=abs_), f"{actual} != {expected}"


# CI explores a fixed, reproducible set of examples (a red build must be reproducible from its
# log); local runs draw fresh examples each time and keep finding new ones, fewer of them where
# a test does not set its own count (`dev`; HYPOTHESIS_PROFILE=ci or =default chooses another).
settings.register_profile("ci", derandomize=True, database=None)
settings.register_profile("dev", max_examples=25)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI")
                                                              else "dev"))


# The development loop leaves out the tests marked slow (`python -m pytest -q -m "not slow"`,
# README); CI runs them all. A test past SLOW_SECONDS that is not marked is named at the end of
# the run — a warning, never a failure: the machines are shared and noisy.
SLOW_SECONDS = 2.0
_unmarked: list[tuple[str, float]] = []


def pytest_runtest_logreport(report) -> None:
    if report.when == "call" and report.duration > SLOW_SECONDS \
            and "slow" not in report.keywords:
        _unmarked.append((report.nodeid, report.duration))


def pytest_terminal_summary(terminalreporter) -> None:
    if _unmarked:
        terminalreporter.write_sep("-", f"{len(_unmarked)} test(s) past {SLOW_SECONDS:g} s "
                                        "not marked slow (@pytest.mark.slow)")
        for nodeid, seconds in sorted(_unmarked, key=lambda row: -row[1])[:20]:
            terminalreporter.write_line(f"{seconds:6.1f} s  {nodeid}")
