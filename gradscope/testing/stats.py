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

    @property
    def calls(self) -> int:
        return self.passed + self.failed + self.delegated

    def add(self, other: dict[str, Any]) -> None:
        """Counts from another process (a pytest-xdist worker's)."""
        self.passed += other.get("passed", 0)
        self.failed += other.get("failed", 0)
        self.delegated += other.get("delegated", 0)
        for why, count in other.get("reasons", {}).items():
            self.reasons[why] = self.reasons.get(why, 0) + count


STATS = DropInStats()
