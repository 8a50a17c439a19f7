"""A rank's process entry (gradscope/_rank.py): the job's outcome as the launcher reads it —
a report, the check's own error, or gradscope's crash with its traceback."""

from __future__ import annotations

from gradscope._rank import _performed
from gradscope.errors import UsageError
from gradscope.options import Request


def test_an_error_of_the_check_is_its_outcome():
    kind, payload = _performed(("check", Request("check", "no_such_file.py:f")))
    assert kind == "error" and isinstance(payload, UsageError)


def test_gradscopes_own_failure_is_a_crash_with_its_traceback():
    kind, payload = _performed(("single", None, None, None, None, None, None))
    assert kind == "crash" and "Traceback" in payload
