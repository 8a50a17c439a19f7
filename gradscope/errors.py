"""The two errors a user can see: bad usage (exit 2) and their own code raising (exit 3)."""

from __future__ import annotations


class GradscopeError(Exception):
    """Base of every error gradscope raises on purpose."""

    exit_code = 2


class UsageError(GradscopeError, ValueError):
    """Bad usage or input: the message says what was wrong and what is allowed."""

    exit_code = 2


class TargetError(GradscopeError, RuntimeError):
    """The user's own code raised (import, forward or backward)."""

    exit_code = 3
