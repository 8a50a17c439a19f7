"""One check per distributed target in tests/data/parallel.py, shared by every test that reads
it (each costs two processes' start)."""

from __future__ import annotations

import multiprocessing
from functools import cache

import gradscope
from gradscope.report.model import Report
from tests.paths import DATA

PAR = f"{DATA}/parallel.py"


@cache
def checked(name: str) -> Report:
    report = gradscope.check(f"{PAR}:{name}", nproc=2)
    assert not multiprocessing.active_children()  # every rank reaped
    return report
