"""What the gradcheck drop-in did in this process: passed, failed, and decided by torch's own
gradcheck (with why) — the pytest plugin's summary line, added up over pytest-xdist workers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class DropInStats:
    """What the drop-in did in this process (the pytest plugin's summary line)."""

    passed: int = 0
    failed: int = 0
    delegated: int = 0  # calls gradscope cannot check, decided by torch's own gradcheck
    reasons: dict[str, int] = field(default_factory=dict)  # why, and how often
    # calls with nothing to compare (zero-element inputs or outputs): what was empty, how often
    nothing: dict[str, int] = field(default_factory=dict)
    warned: int = 0  # passed as torch's gradcheck judges them; gradscope's own check disputes
    # failed, with raise_exception=False: the False went to the test, which decides what it
    # means (a test that expects it passes), so these are counted apart from the failures
    returned_false: int = 0
    # the pytest tests the calls came from (node ids; dicts, which xdist's channel carries),
    # and those a gradscope failure failed: counts a reader can set beside pytest's own
    tests: dict[str, int] = field(default_factory=dict)
    failed_tests: dict[str, int] = field(default_factory=dict)
    current: str = ""  # the test running now (set by the pytest plugin)

    def called(self) -> None:
        """One more gradcheck call, in the current test."""
        if self.current:
            self.tests[self.current] = self.tests.get(self.current, 0) + 1

    def failing(self, raising: bool = True) -> None:
        """The current call failed: raising, it fails its test (under pytest); returning
        False, the test reads the answer and is counted as pytest counts it."""
        if not raising:
            self.returned_false += 1
            return
        self.failed += 1
        if self.current:
            self.failed_tests[self.current] = 1

    def decided_by_torch(self, why: str) -> None:
        """A call gradscope cannot check, handed to torch's gradcheck, and why."""
        self.delegated += 1
        _tally(self.reasons, why[:120])

    def nothing_to_compare(self, what: str) -> None:
        """A call whose inputs or outputs have no elements (`what` was empty)."""
        _tally(self.nothing, what[:120])

    @property
    def calls(self) -> int:
        return (self.passed + self.failed + self.returned_false + self.delegated
                + sum(self.nothing.values()))

    def add(self, other: dict[str, Any]) -> None:
        """Counts from another process (a pytest-xdist worker's)."""
        self.passed += other.get("passed", 0)
        self.failed += other.get("failed", 0)
        self.delegated += other.get("delegated", 0)
        self.warned += other.get("warned", 0)
        self.returned_false += other.get("returned_false", 0)
        for table in ("nothing", "reasons"):
            for key, count in other.get(table, {}).items():
                _tally(getattr(self, table), key, count)
        self.tests.update(other.get("tests", {}))
        self.failed_tests.update(other.get("failed_tests", {}))


def _tally(table: dict[str, int], key: str, count: int = 1) -> None:
    table[key] = table.get(key, 0) + count


STATS = DropInStats()
