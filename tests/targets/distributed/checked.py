"""One check per distributed target in tests/data/parallel.py, shared by every test that reads
it (each costs two processes' start)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import gradscope
from gradscope.report.model import Report
from tests.paths import DATA

PAR = f"{DATA}/parallel.py"


@cache
def checked(name: str) -> Report:
    report = gradscope.check(f"{PAR}:{name}", nproc=2)
    assert not children()  # every rank reaped
    return report


def children() -> list[int]:
    """The live child processes of this process (every thread's), from /proc."""
    found = []
    for task in Path("/proc/self/task").iterdir():
        listed = task / "children"
        if listed.exists():
            found += [int(p) for p in listed.read_text().split()]
    return [p for p in found if Path(f"/proc/{p}").exists()
            and "(Z)" not in Path(f"/proc/{p}/stat").read_text().split(")")[-1][:4]]
