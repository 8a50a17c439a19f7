"""A check's result whatever it does (passes, fails, raises, is used wrongly, runs out of
memory), and the suite's exit code: usage errors first, then the user's code, then failures."""

from __future__ import annotations

from pathlib import Path

from gradscope.options import Options, Request
from gradscope.suite.config import CheckSpec
from gradscope.suite.results import CheckResult, SuiteReport, run_one
from tests.paths import DATA


def _spec(target: str, **options) -> CheckSpec:
    return CheckSpec(name=target, request=Request("check", target, Options(**options),
                                                  base=Path(DATA)))


def test_each_outcome_and_its_exit_code():
    assert run_one(_spec("x * 2", at={"x": "1,2"})).outcome == "passed"
    failed = run_one(_spec("corpus.py:SignFlip", at={"x": "0.5"}))
    assert failed.outcome == "failed" and failed.exit_code == 1 and failed.worst_error > 0
    raised = run_one(_spec("targets.py:forward_raises"))
    assert raised.outcome == "raised" and raised.exit_code == 3 and "forward" in raised.error
    wrong = run_one(_spec("x * 2", at={"y": "1"}))
    assert wrong.outcome == "error" and wrong.exit_code == 2 and wrong.report is None
    never = run_one(_spec("corpus.py:SignFlip", at={"x": "0.5"}, fail_on="never"))
    assert never.outcome == "passed" and not never.report.passed


def test_the_suites_exit_code_and_document():
    results = [CheckResult("a", "t", "check", "passed", 0.1),
               CheckResult("b", "t", "check", "failed", 0.1),
               CheckResult("c", "t", "check", "error", 0.1, crashed=True)]
    suite = SuiteReport("cfg.toml", results)
    assert not suite.passed and suite.exit_code == 3
    assert SuiteReport("cfg.toml", results[:2]).exit_code == 1
    data = suite.to_dict()
    assert data["counts"] == {"passed": 1, "failed": 1, "error": 1}
    assert [c["name"] for c in data["checks"]] == ["a", "b", "c"]
