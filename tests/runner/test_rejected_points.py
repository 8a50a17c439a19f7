"""Evaluations gradscope makes on its own initiative (finite differences, their refinement,
random projections, a tangent's differences) at points the target rejects: smaller steps are
tried, what stays rejected is `unchecked` with a note, and the check goes on — a rejection is
never the check's failure, never excuses a wrong gradient, and never makes an empty PASS."""

from __future__ import annotations

import pytest
import torch

import gradscope
from gradscope.engines.fd import FiniteDifferences
from gradscope.engines.fd.batcher import MAX_REJECTED
from gradscope.engines.fd.policy import DEFAULT_EPS
from gradscope.errors import TargetError
from gradscope.report.status import Status
from tests.paths import DATA

REJECTING = f"{DATA}/rejecting.py"


def _input(report, name="p"):
    return next(i for i in report.inputs if i.name == name)


def test_an_element_at_the_edge_is_unchecked_and_the_others_compared():
    report = gradscope.check(f"{REJECTING}:probability", p="0.5,1.0,0.25")
    assert report.passed
    counts = _input(report).status_counts
    assert counts == {Status.OK: 2, Status.UNCHECKED: 1}
    note = next(n for n in report.notes if "rejected the perturbed points" in n)
    assert "1 element(s) of p (flat index 1)" in note
    assert "ValueError: probability pushed past 1" in note


def test_an_element_near_the_edge_is_estimated_with_smaller_steps():
    report = gradscope.check(f"{REJECTING}:probability", p="0.5,0.99995,0.25")
    assert report.passed and _input(report).status_counts == {Status.OK: 3}
    assert not any("rejected the perturbed points" in n for n in report.notes)


def test_refinement_that_lands_on_a_rejected_point_is_not_the_users_failure():
    # x = 5e-5 with h = 1e-4: x ± h are accepted, the refinement's x - h/2 = 0 is not
    report = gradscope.check(f"{REJECTING}:underflow", x="0.5,0.00005,0.3")
    assert report.passed and _input(report, "x").status_counts == {Status.OK: 3}


def test_a_wrong_gradient_beside_a_rejected_element_still_fails():
    report = gradscope.check(f"{REJECTING}:wrong_probability", p="0.5,1.0,0.25")
    assert not report.passed
    assert _input(report).status_counts == {Status.MISMATCH: 2, Status.UNCHECKED: 1}


def test_a_target_that_rejects_every_perturbed_point_is_never_a_pass():
    report = gradscope.check(f"{REJECTING}:rejects_everything", x="0.5,1.0,1.5")
    assert not report.passed
    assert _input(report, "x").status == Status.INCONCLUSIVE


def test_a_rejected_tangent_skips_the_forward_differences_with_the_reason():
    report = gradscope.jvp(f"{REJECTING}:probability", p="0.5,1.0,0.25", tangent="1,1,1")
    column = report.forward.columns["finite_difference"]
    assert column.values is None and column.failed
    assert "probability pushed past 1" in column.skipped


def test_the_checkpoint_like_function_that_frees_its_context_passes():
    # its graph serves one backward: the determinism check needs a fresh forward
    report = gradscope.check(f"{DATA}/hostile.py:FreesSaved", x="0.5,1.0,2.0")
    assert report.passed


def test_a_vanishing_op_whose_target_refuses_far_points_is_still_found():
    report = gradscope.check(f"{DATA}/hostile.py:rejects_far_rounded", x="5.4,6.2,6.4")
    assert report.passed  # round's zero gradient is what autograd computes
    assert "vanishing_gradient" in [d.kind for d in report.diagnostics]


# ------------------------------------------------------------------ the engine itself
def _traced(limit: float):
    def traced(values):
        x = values["x"]
        if bool((x > limit).any()):
            raise TargetError("rejected", during="forward", error="ValueError",
                              detail=f"past {limit}")
        return x * x, []
    return traced


@pytest.mark.parametrize("elementwise", [True, False])
def test_rejected_elements_come_out_nan_and_marked(elementwise):
    x = torch.tensor([0.5, 1.0, 0.25, 1.0], dtype=torch.float64)
    fd = FiniteDifferences(_traced(1.0), {"x": x}, eps=DEFAULT_EPS,
                           elementwise={"x"} if elementwise else set(), two_point_from=1)
    est = fd.estimate("x")
    assert est.rejected.tolist() == [False, True, False, True]
    assert est.checked.tolist() == [True, False, True, False]
    assert est.why == "ValueError: past 1.0"
    grad, _ = est.vjp(torch.ones(4, dtype=torch.float64))
    assert torch.allclose(grad[[0, 2]], 2 * x[[0, 2]]) and grad[[1, 3]].isnan().all()


def test_refining_keeps_what_was_rejected():
    x = torch.tensor([0.5, 1.0, 0.25], dtype=torch.float64)
    fd = FiniteDifferences(_traced(1.0), {"x": x}, eps=DEFAULT_EPS, elementwise=set())
    first = fd.estimate("x")
    refined, count = fd.refine(first, torch.ones(3, dtype=torch.bool))
    assert count == 2 and refined.rejected.tolist() == [False, True, False]


def test_a_target_that_rejects_too_much_is_raised_for_the_input_to_be_skipped():
    x = torch.linspace(0.0, 1.0, 4 * MAX_REJECTED, dtype=torch.float64)
    calls = []

    def counting(values):
        calls.append(1)
        if not torch.equal(values["x"], x):
            raise TargetError("no", during="forward", error="ValueError", detail="no")
        return values["x"].sum().reshape(()), []

    fd = FiniteDifferences(counting, {"x": x}, eps=DEFAULT_EPS, elementwise=set())
    with pytest.raises(TargetError):
        fd.estimate("x")
    assert len(calls) < 4 * MAX_REJECTED  # bounded, far from every column at every step


@pytest.mark.parametrize("elementwise", [True, False])
def test_a_refinement_rejected_at_every_step_leaves_the_element_unchecked(elementwise):
    # a target that takes the two-point stencil's points (±h) and no smaller step: the
    # two-point difference has no truncation bound without its extrapolation, so it must not
    # be judged by
    x = torch.tensor([0.5, 0.25], dtype=torch.float64)

    def traced(values):
        moved = (values["x"] - x).abs()
        if bool(((moved > 0) & (moved < 0.75 * DEFAULT_EPS)).any()):
            raise TargetError("no", during="forward", error="ValueError", detail="too close")
        return values["x"] ** 3, []

    fd = FiniteDifferences(traced, {"x": x}, eps=DEFAULT_EPS,
                           elementwise={"x"} if elementwise else set(), two_point_from=1)
    first = fd.estimate("x")
    assert first.rejected is None and first.points.tolist() == [2, 2]
    refined, _ = fd.refine(first, torch.tensor([True, False]))
    assert refined.rejected.tolist() == [True, False] and refined.why == "ValueError: too close"
    assert refined.checked.tolist() == [False, True]


def test_a_refinement_rejected_too_often_leaves_every_doubted_element_unchecked():
    x = torch.linspace(0.1, 0.9, 2 * MAX_REJECTED, dtype=torch.float64)

    def traced(values):
        moved = (values["x"] - x).abs()
        if bool(((moved > 0) & (moved < 0.75 * DEFAULT_EPS)).any()):
            raise TargetError("no", during="forward", error="ValueError", detail="too close")
        return (values["x"] ** 3).sum(), []

    fd = FiniteDifferences(traced, {"x": x}, eps=DEFAULT_EPS, elementwise=set())
    first = fd.estimate("x")
    doubted = torch.zeros_like(x, dtype=torch.bool)
    doubted[::2] = True
    refined, count = fd.refine(first, doubted)
    assert count == 0 and torch.equal(refined.rejected, doubted)
    assert refined.vjp(torch.ones(()))[0][::2].isnan().all()


@pytest.mark.parametrize("elementwise", [True, False])
def test_a_retry_the_target_rejects_keeps_the_estimate_it_had(elementwise):
    # the first stencil crosses a branch (a kink: retried with smaller steps), and the target
    # refuses every smaller step: the element keeps its first estimate, marked at the kink,
    # and is not called rejected
    x = torch.tensor([0.5, 0.25], dtype=torch.float64)

    def traced(values):
        moved = (values["x"] - x).abs()
        if bool(((moved > 0) & (moved < 0.75 * DEFAULT_EPS)).any()):
            raise TargetError("no", during="forward", error="ValueError", detail="too close")
        branch = (values["x"] > x + 0.5 * DEFAULT_EPS).to(torch.int64)
        return values["x"] ** 2, [branch]

    fd = FiniteDifferences(traced, {"x": x}, eps=DEFAULT_EPS,
                           elementwise={"x"} if elementwise else set(), two_point_from=1)
    est = fd.estimate("x")
    assert est.rejected is None or not bool(est.rejected.any())
    assert est.kink.all() and torch.isfinite(est.partial).all()
