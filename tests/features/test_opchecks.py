"""A custom op target gets torch.library.opcheck's tests as named checks: all pass for a whole
op; a missing fake implementation fails the run with opcheck's finding in one line; targets
that are no custom op get none."""

from __future__ import annotations

import gradscope
from tests.paths import DATA

OPS = f"{DATA}/opcheck_ops.py"
TESTS = {"test_schema", "test_autograd_registration", "test_faketensor",
         "test_aot_dispatch_dynamic"}


def _opchecks(report) -> dict[str, bool]:
    return {c.label.removeprefix("opcheck "): c.passed for c in report.upstream_checks
            if c.label.startswith("opcheck ")}


def test_a_whole_op_passes_every_opcheck_test():
    report = gradscope.check(f"{OPS}:cube", shape={"x": (4,)})
    assert report.passed and _opchecks(report) == dict.fromkeys(TESTS, True)


def test_a_missing_fake_implementation_fails_with_opchecks_finding():
    report = gradscope.check(f"{OPS}:no_fake", shape={"x": (3,)})
    assert not report.passed
    assert _opchecks(report) == {"test_schema": True, "test_autograd_registration": True,
                                 "test_faketensor": False, "test_aot_dispatch_dynamic": False}
    (found, *_) = [d for d in report.diagnostics if d.kind == "opcheck"]
    assert "gradscope_opcheck::no_fake" in found.message
    assert "no fake impl" in found.message and "\n" not in found.message
    assert "register_fake" in found.hint
    # the gradient itself is right: only opcheck's tests fail
    assert report["x"].status == "ok"
    assert "opcheck test_faketensor fails" in report.to_text()
    # its row says what happened: a test failed, no numbers compared (no "mismatch", no 0)
    (row,) = [line for line in report.to_text().splitlines()
              if line.strip().startswith("opcheck test_faketensor")]
    assert row.split()[2:] == ["failed", "—", "—"]
    (row,) = [line for line in report.to_text().splitlines()
              if line.strip().startswith("opcheck test_schema")]
    assert row.split()[2:] == ["ok", "—", "—"]
    assert "| opcheck test_faketensor | **failed** | — |" in report.to_markdown()
    assert report.to_dict()["upstream_checks"][-1]["result"] in ("failed", "ok")


def test_numbers_and_lists_from_the_schema_are_given_to_opcheck():
    report = gradscope.check(f"{OPS}:summed", shape={"x": (2, 3)}, arg={"dims": [1]})
    assert report.passed and all(_opchecks(report).values())


def test_no_custom_op_no_opcheck():
    assert not _opchecks(gradscope.check("x * 2"))
    assert not _opchecks(gradscope.check(f"{OPS}:uses_cube", shape={"x": (2, 3)}))
