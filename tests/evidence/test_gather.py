"""The evidence stage: autograd beside every reference, laid out as views with their raw
comparisons, two-point estimates refined once where doubted, and nothing of it mutable."""

from __future__ import annotations

import dataclasses

import pytest

from gradscope.evidence.gather import Evidence, backward, gather
from gradscope.options import Options, Request
from gradscope.report.status import Status
from gradscope.runner import prepare
from tests.paths import DATA


def _gather(command: str, target: str, **options) -> Evidence:
    return gather(prepare(Request(command, target, Options(**options))))


def test_check_lays_out_the_table_the_random_upstreams_and_the_jacobian():
    evidence = _gather("check", "sin(x) * y", at={"x": "1,2", "y": "3,4"})
    labels = [v.label for v in evidence.views]
    assert labels[0] == "table" and labels[-1] == "full Jacobian"
    assert sum(lab.startswith("random upstream") for lab in labels) == 2
    table = evidence.table
    assert set(table.answers["x"]) == {"symbolic", "finite_difference"}
    # another upstream is judged against the exact engine alone
    assert set(evidence.views[1].answers["x"]) == {"symbolic"}
    assert all(c.worst() == Status.OK for v in evidence.views for c in v.raw.values())


def test_jvp_has_the_table_only_and_jacobian_the_jacobian_only():
    assert [v.label for v in _gather("jvp", "x * 2", at={"x": "1,2"}).views] == ["table"]
    (view,) = _gather("jacobian", "x * 2", at={"x": "1,2"}).views
    assert view.jacobian and view.autograd["x"].shape == (2, 2)


def test_a_doubted_two_point_estimate_is_refined_before_anyone_judges():
    # a large elementwise input starts with two points; a wrong gradient is doubted, refined
    evidence = _gather("jvp", f"{DATA}/backwards.py:Double", shape={"*": (70000,)},
                       grad="randn(70000)")
    est = evidence.finite.estimates["x"]
    assert bool((est.points == 4).all())
    assert evidence.table.raw["x"].has(Status.MISMATCH)


def test_a_refused_backward_is_a_failure_not_a_crash_and_has_no_views():
    prepared = prepare(Request("check", f"{DATA}/backwards.py:WrongShape",
                               Options(shape={"*": (2, 3)})))
    back = backward(prepared)
    assert back.grads is None and back.failure.kind == "backward_shape"
    evidence = gather(prepared)
    assert evidence.table is None and evidence.views == ()


def test_the_upstream_shown_is_the_one_given_even_when_backward_writes_into_its_copy():
    evidence = _gather("check", f"{DATA}/backwards.py:InPlace", at={"x": "1,2,3"})
    assert evidence.backward.upstream.tolist() == [1.0, 1.0, 1.0]
    assert evidence.backward.after.tolist() == [3.0, 3.0, 3.0]


def test_evidence_is_frozen():
    evidence = _gather("jvp", "x * 2", at={"x": "1,2"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        evidence.views = ()  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        evidence.table.raw = {}  # type: ignore[misc]


def _run_json(capsys, *args: str) -> tuple[int, dict]:
    import json

    from tests.command import run

    code, out, _ = run(capsys, *args, "--format", "json")
    return code, json.loads(out)


def test_an_ok_resting_on_a_swamped_estimate_is_refined_and_widened(capsys):
    # at --eps 1e-6 a float32 target's two-point differences carry bounds wider than the
    # derivative: the wrong first row "agreed" by its bound alone; refined, widened, it fails
    code, report = _run_json(capsys, "check", f"{DATA}/coarse.py:CubeRowBug", "--shape",
                             "x=2,3", "--eps", "1e-6")
    statuses = report["inputs"][0]["element_status"]
    assert code == 1 and statuses == [["mismatch"] * 3, ["ok"] * 3]
    assert any("round-off swamped the estimates" in n for n in report["notes"])
    code, report = _run_json(capsys, "check", f"{DATA}/coarse.py:Cube32", "--shape", "x=2,3",
                             "--eps", "1e-6")
    assert code == 0 and report["inputs"][0]["status_counts"] == {"ok": 6}


def test_a_wrong_row_at_a_tiny_step_is_a_mismatch_never_a_kink(capsys):
    code, report = _run_json(capsys, "check", f"{DATA}/coarse.py:CubeRowBug", "--shape",
                             "x=5,5", "--eps", "1e-6")
    counts = report["inputs"][0]["status_counts"]
    assert code == 1 and "nondifferentiable" not in counts and counts["mismatch"] == 4
    assert "CubeRowBug.backward" in json_culprit(report)


def json_culprit(report: dict) -> str:
    return " ".join(d["message"] for d in report["diagnostics"] if d["kind"] == "culprit")


def test_round_off_no_step_beats_is_unchecked_and_never_a_pass(capsys):
    code, report = _run_json(capsys, "check", f"{DATA}/coarse.py:half_offset", "--at",
                             "x=1,2,3", "--eps", "1e-6")
    assert code == 1 and report["inputs"][0]["status_counts"] == {"unchecked": 3}
    assert any("stayed dominated by round-off" in n for n in report["notes"])
