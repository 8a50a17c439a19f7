"""The checks of hand-written backward passes, on the seeds' Functions (correct and buggy)."""

from __future__ import annotations

import torch

import gradscope
from tests.paths import BUGGY, DATA, SEEDS

BACKWARDS = DATA / "backwards.py"


def _kinds(report):
    return {d.kind for d in report.diagnostics}


def test_straight_through_round_is_a_surrogate_not_a_failure():
    report = gradscope.check(f"{SEEDS}:RoundSTE", x="randn(2,6)")
    (x,) = report.inputs
    assert report.passed and x.status == "surrogate"
    assert "surrogate_gradient" in _kinds(report)
    diag = next(d for d in report.diagnostics if d.kind == "surrogate_gradient")
    assert diag.inputs == ["x"] and diag.count == x.status_counts["surrogate"]
    assert not gradscope.check(f"{SEEDS}:RoundSTE", x="randn(2,6)", fail_on="warning").passed


def test_straight_through_round_near_a_jump_is_still_a_surrogate():
    # 0.50003 lies within the first step (1e-4) of round's jump at 0.5: the two-point estimate
    # there is a steep slope until refinement shows it does not converge at that step
    report = gradscope.check(f"{SEEDS}:RoundSTE", x="0.3,0.50003,1.2,-0.7")
    assert report.passed, report.to_text()
    assert report.inputs[0].element_status == ["surrogate"] * 4


def test_seed_clamp_backward_fails_at_the_elements_above_one():
    report = gradscope.check(f"{BUGGY}:ClampSeeds", x="-0.5,0.3,0.7,1.5")
    (x,) = report.inputs
    assert not report.passed
    assert x.element_status == ["ok", "ok", "ok", "mismatch"]
    nonlinear = next(d for d in report.diagnostics if d.kind == "nonlinear_backward")
    assert nonlinear.indices == {"x": [[3]]}


def test_correct_clamp_backward_passes():
    assert gradscope.check(f"{SEEDS}:Clamp01", x="-0.5,0.3,0.7,1.5").passed


def test_killhead_passes_and_forgetful_one_fails_exactly_on_the_head():
    good = gradscope.check(f"{SEEDS}:KillHead", input="randn(3,8)", arg={"n": 2})
    assert good.passed and good.inputs[0].status == "ok"
    bad = gradscope.check(f"{BUGGY}:KillHeadForgetful", input="randn(3,8)", arg={"n": 2})
    assert not bad.passed
    statuses = bad.inputs[0].element_status
    wrong = {(r, c) for r, row in enumerate(statuses) for c, s in enumerate(row)
             if s == "mismatch"}
    assert wrong == {(r, c) for r in range(3) for c in range(2)}


def test_absprod_correct_and_one_gradient_arity():
    assert gradscope.check(f"{SEEDS}:AbsProd").passed
    report = gradscope.check(f"{BUGGY}:AbsProdOneGradient")
    assert not report.passed
    diag = next(d for d in report.diagnostics if d.kind == "backward_arity")
    assert ("AbsProdOneGradient.backward (buggy_functions.py:49) returned 1 gradient(s) but "
            "forward took 2") in diag.message
    assert report.inputs[0].autograd is None and report.inputs[0].finite_difference is not None


def test_constant_backward_hidden_by_ones_is_nonlinear():
    # With the default ones upstream the VJP is right (2 everywhere) ...
    report = gradscope.vjp(f"{BACKWARDS}:Double", x="1,2,3")
    assert report.inputs[0].status == "ok"
    # ... but backward ignores grad_output, which the linearity check catches.
    assert "nonlinear_backward" in _kinds(report) and not report.passed


def test_inplace_and_nondeterministic_backward():
    assert "inplace_backward" in _kinds(gradscope.vjp(f"{BACKWARDS}:InPlace", x="1,2"))
    noisy = gradscope.check(f"{BACKWARDS}:Noisy", x="1,2")
    assert "nondeterministic_backward" in _kinds(noisy) and not noisy.passed


def test_a_backward_that_differs_within_the_tolerance_is_a_warning_not_a_failure():
    # two calls 1e-13 apart: both agree with the references at the tolerance they are
    # judged at; a thousandth apart (Noisy, above) is a failure
    jittery = gradscope.check(f"{BACKWARDS}:Jittery", x="1,2")
    assert jittery.passed and "nondeterministic_backward" not in _kinds(jittery)
    (found,) = [d for d in jittery.diagnostics
                if d.kind == "nondeterministic_within_tolerance"]
    assert "of the comparison's tolerance" in found.message
    strict = gradscope.check(f"{BACKWARDS}:Jittery", x="1,2", fail_on="warning")
    assert not strict.passed


def test_a_backward_repeated_by_the_flow_trace_is_not_run_a_third_time(monkeypatch):
    from gradscope.engines.autograd import AutogradEngine

    def refused(*_):
        raise AssertionError("the flow trace's backward agreed: no third run")

    monkeypatch.setattr(AutogradEngine, "fresh_vjp", refused)
    assert gradscope.check(f"{BACKWARDS}:Cube", x="1,2").passed


def test_a_backward_the_flow_trace_saw_differ_is_judged_by_a_run_of_its_own():
    class SecondCallOff(torch.autograd.Function):  # differs on its 2nd backward call only
        calls = 0

        @staticmethod
        def forward(ctx, x):
            return x * 3

        @staticmethod
        def backward(ctx, g):
            SecondCallOff.calls += 1
            return g * (4 if SecondCallOff.calls == 2 else 3)

    from gradscope.engines.autograd import AutogradEngine
    from gradscope.evidence.custom_backward import determinism

    x = torch.tensor([1.0, 2.0], dtype=torch.float64)
    engine = AutogradEngine(lambda v: SecondCallOff.apply(v["x"]), {"x": x})
    first = engine.backward(torch.ones(2, dtype=torch.float64))
    assert determinism(engine, torch.ones(2, dtype=torch.float64), first, "t",
                       repeated=True) is None  # (the caller's run agreed: none of its own)
    found = determinism(engine, torch.ones(2, dtype=torch.float64), first, "t")
    assert found is not None and found.kind == "nondeterministic_backward"


def test_backward_shape_error():
    report = gradscope.check(f"{BACKWARDS}:WrongShape", x="randn(2,3)")
    assert "backward_shape" in _kinds(report) and not report.passed


def test_repeat_shows_accumulation():
    report = gradscope.vjp(f"{SEEDS}:MyLayer", input="1,2,3", repeat=3)
    acc = report.accumulation
    assert acc["repeat"] == 3 and acc["equals_repeat_times_vjp"]
    assert "zero_grad" in acc["note"]


def test_order_two_checks_double_backward():
    assert gradscope.check(f"{SEEDS}:AbsProd", order=2).passed
    second = gradscope.check("sin(x) * y", order=2)
    assert second.passed
    assert second.inputs[0].symbolic_skipped.startswith("--order 2 differentiates torch's")
    assert gradscope.check("3 * x", order=2).passed  # constant gradient: zero second derivative
    first = gradscope.check(f"{BACKWARDS}:Cube", x="1,2")
    assert first.passed
    second = gradscope.check(f"{BACKWARDS}:Cube", x="1,2", order=2)
    assert not second.passed
    assert second.target_kind == "autograd_function (order 2)"


def test_tensor_returned_for_a_non_tensor_argument_is_arity():
    report = gradscope.check(f"{BACKWARDS}:GradientForN", input="randn(2,3)", arg={"n": 1})
    diag = next(d for d in report.diagnostics if d.kind == "backward_arity")
    assert "not a tensor" in diag.message and not report.passed


def test_linearity_compares_a_block_at_a_time_with_the_same_masks(monkeypatch):
    import torch

    from gradscope.compare.tolerance import Tolerance
    from gradscope.evidence import custom_backward

    g = torch.linspace(-3, 3, 1001, dtype=torch.float64)
    other = g.clone()
    other[[5, 500, 1000]] += 1e-3  # three departures, in three different blocks
    tol = Tolerance.for_dtype("float64", None, None)
    whole = custom_backward._departed(other, [(0.5, g), (0.5, g)], tol)
    monkeypatch.setattr(custom_backward, "BLOCK", 7)
    blocks = custom_backward._departed(other, [(0.5, g), (0.5, g)], tol)
    assert torch.equal(whole, blocks)
    assert blocks.nonzero().flatten().tolist() == [5, 500, 1000]


def test_a_custom_op_without_an_autograd_formula_fails_with_the_registration_finding():
    # inside a loss, torch raises at backward: a finding of the run (exit 1), not exit 3
    for target in ("uses_unregistered", "cube_unregistered"):
        report = gradscope.check(f"tests/data/custom_ops.py:{target}", x="1,2,3")
        assert not report.passed
        (found,) = [d for d in report.diagnostics if d.kind == "autograd_registration"]
        assert found.op == "gradscope_culprits::cube_unregistered"
        assert "register_autograd" in found.hint
        assert any(f.kind == "autograd_registration" for f in report.failures)
