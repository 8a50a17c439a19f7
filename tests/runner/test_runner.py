"""End-to-end numbers through the library: the seeds' acceptance cases, asserted per engine."""

from __future__ import annotations

import pytest
import torch

import gradscope
from gradscope.engines.fd.engine import TWO_POINT_FROM, FiniteDifferences
from gradscope.errors import UsageError
from gradscope.rng import seed_for
from tests.conftest import assert_close
from tests.paths import DATA

ENGINES = ("autograd", "symbolic", "finite_difference")


def _by_name(report):
    return {i.name: i for i in report.inputs}


def test_seed003_vector_upstream_all_engines():
    report = gradscope.vjp("3*a + 2*b*b + log(c)", a="1,2,3", b="3,4,5", c="6,7,8",
                           grad="0.1,1,1e-4")
    expected = {"a": [0.3, 3.0, 3e-4], "b": [1.2, 16.0, 2e-3],
                "c": [1 / 60, 1 / 7, 1.25e-5]}
    inputs = _by_name(report)
    for name, want in expected.items():
        for engine in ENGINES:
            assert getattr(inputs[name], engine) == pytest.approx(want, rel=1e-8), (name, engine)
        assert inputs[name].status == "ok"
    assert inputs["c"].autograd == pytest.approx([1.6667e-2, 1.4286e-1, 1.25e-5], rel=1e-4)
    assert report.passed
    assert [i.formula for i in report.inputs] == ["3*v", "4*b*v", "v/c"]
    assert report.upstream.values == [0.1, 1.0, 1e-4]


def test_seed003_scalar_default_upstream():
    report = gradscope.vjp("3*a + 2*b*b + log(c)", a=0.1, b=1.0, c=0.1)
    inputs = _by_name(report)
    for name, want in {"a": 3.0, "b": 4.0, "c": 10.0}.items():
        for engine in ENGINES:
            assert getattr(inputs[name], engine) == pytest.approx(want, rel=1e-8)
    assert report.upstream.values == 1.0 and report.output.shape == []


def test_seed003_one_hot_upstream_row():
    report = gradscope.vjp("2*x", x="[[1,2,3,4]]", grad="[[0,1,0,0]]")
    (x,) = report.inputs
    for engine in ENGINES:
        assert_close(getattr(x, engine), [[0, 2, 0, 0]], abs_=1e-9)


def test_seed004_upstream_equal_to_input_gives_2a_squared():
    report = gradscope.vjp("a*a", a="[[1,2,3],[4,5,6]]", grad="[[1,2,3],[4,5,6]]")
    (a,) = report.inputs
    for engine in ENGINES:
        assert_close(getattr(a, engine), [[2, 8, 18], [32, 50, 72]], rel=1e-8)
    ones = gradscope.vjp("a*a", a="[[1,2,3],[4,5,6]]")
    assert ones.inputs[0].autograd == [[2, 4, 6], [8, 10, 12]]


@pytest.mark.parametrize("expr, at", [
    ("clamp(x, 0, 1)", {"x": "-0.5,0.3,0.7,1.5"}),
    ("round(x)", {}),
    ("floor(x) + ceil(x) + trunc(x) + sign(x)", {}),
    ("relu(x)", {"x": "-1,-2,3"}),
])
def test_piecewise_ops_are_not_false_mismatches(expr, at):
    report = gradscope.check(expr, **at)
    assert report.passed
    assert all(i.status_counts.get("mismatch", 0) == 0 for i in report.inputs)


def test_abs_at_zero_is_nondifferentiable_not_mismatch():
    report = gradscope.check("abs(x)", x="0,1")
    (x,) = report.inputs
    assert x.element_status == ["nondifferentiable", "ok"]
    assert report.passed
    (diag,) = [d for d in report.diagnostics if d.kind == "nondifferentiable_point"]
    assert diag.op == "abs" and diag.where == "abs(x)" and diag.count == 1
    assert diag.indices == {"x": [[0]]}


def test_clamp_bound_inside_stencil_is_nondifferentiable():
    report = gradscope.check("clamp(x, 0, 1)", x="1e-9,0.5,1")
    (x,) = report.inputs
    assert x.element_status == ["nondifferentiable", "ok", "nondifferentiable"]


def test_near_kink_resolved_by_smaller_steps():
    # 1e-5 is inside the default stencil (1e-4) but a refined step resolves it.
    report = gradscope.check("abs(x)", x="1e-5,-1e-5")
    assert report.inputs[0].element_status == ["ok", "ok"]


def test_log_of_negative_is_undefined():
    report = gradscope.check("log(x)", x="-1,1")
    (x,) = report.inputs
    assert x.element_status == ["undefined", "ok"]
    assert any(d.kind == "nan" for d in report.diagnostics)


def test_jump_of_round_at_half_integer():
    report = gradscope.check("round(x)", x="0.5,1.2")
    assert report.inputs[0].element_status == ["nondifferentiable", "vanishing"]


def test_grad_shape_mismatch_names_both_shapes():
    with pytest.raises(UsageError, match=r"--grad has shape \(2,\).*output has shape \(3,\)"):
        gradscope.vjp("x*2", x="1,2,3", grad="1,2")


def test_default_inputs_follow_grad_shape_and_domain():
    report = gradscope.vjp("log(c) * a", grad="ones(2,3)")
    inputs = _by_name(report)
    assert inputs["a"].shape == [2, 3] and inputs["c"].shape == [2, 3]
    assert inputs["c"].origin.startswith("uniform(0.1,2")
    assert min(min(row) for row in inputs["c"].values) > 0
    assert report.passed


def test_the_default_shape_is_more_than_a_handful_with_an_exact_zero():
    report = gradscope.check("sum(x)")
    assert report.inputs[0].shape == [25] and 0.0 in report.inputs[0].values


def test_seeded_inputs_are_reproducible_and_seed_dependent():
    first = gradscope.check("x*y", seed=1).inputs[0].values
    again = gradscope.check("x*y", seed=1).inputs[0].values
    other = gradscope.check("x*y", seed=2).inputs[0].values
    assert first == again and first != other


def test_reductions_and_broadcasting():
    report = gradscope.check("sum(sin(x)**2) * mean(cos(x)) + prod(y, 0) @ w",
                             x="randn(4)", y="randn(2,3)", w="randn(3)")
    assert report.passed, report.to_text()
    assert all(i.status == "ok" for i in report.inputs)
    assert {i.finite_difference_mode for i in report.inputs} == {"dense"}


def test_broadcast_elementwise_uses_one_batch():
    report = gradscope.check("x * y", x="randn(2,3)", y="randn(3)")
    modes = {i.name: i.finite_difference_mode for i in report.inputs}
    assert modes == {"x": "elementwise", "y": "elementwise"}
    assert report.passed


def test_max_ties_follow_torch_convention():
    report = gradscope.vjp("max(x)", x="1,3,3")
    (x,) = report.inputs
    assert x.autograd == [0.0, 0.5, 0.5]
    assert x.symbolic == [0.0, 0.5, 0.5]


def test_maximum_tie_is_half_in_both_engines():
    report = gradscope.vjp("maximum(x, y)", x="1,1", y="1,2")
    inputs = _by_name(report)
    assert inputs["x"].symbolic == inputs["x"].autograd == [0.5, 0.0]
    assert inputs["y"].symbolic == inputs["y"].autograd == [0.5, 1.0]
    assert inputs["x"].element_status[0] == "nondifferentiable"


def test_check_covers_random_upstreams_and_jacobian():
    report = gradscope.check("x * y", x="1,2", y="3,4")
    labels = [c.label for c in report.upstream_checks]
    assert labels[:2] == [f"random upstream #1 (uniform(-1,1), seed {seed_for(0, ':upstream0')})",
                          f"random upstream #2 (uniform(-1,1), seed {seed_for(0, ':upstream1')})"]
    assert labels[2] == "full Jacobian"
    assert all(c.passed for c in report.upstream_checks)


def test_jvp_forward_mode_three_engines():
    report = gradscope.jvp("sin(x) * y", x="1,2", y="3,4", tangent={"x": "1,0", "y": "0,1"})
    fwd = report.forward
    want = [3 * torch.cos(torch.tensor(1.0)).item(), torch.sin(torch.tensor(2.0)).item()]
    for arr in (fwd.autograd, fwd.symbolic, fwd.finite_difference):
        assert arr == pytest.approx(want, rel=1e-7)
    assert fwd.status == "ok" and fwd.tangent == {"x": [1.0, 0.0], "y": [0.0, 1.0]}


def test_jvp_single_input_tangent_without_name():
    report = gradscope.jvp("x**3", x="2", tangent="1")
    assert report.forward.autograd == pytest.approx(12.0)


def test_jacobian_command_matrix():
    report = gradscope.jacobian("softmax(x)", x="1,2,3")
    (x,) = report.inputs
    assert x.jacobian_shape == [3, 3]
    s = torch.softmax(torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64), 0)
    want = (torch.diag(s) - torch.outer(s, s)).tolist()
    for engine in ENGINES:
        assert_close(getattr(x, engine), want, abs_=1e-9)


def test_jacobian_refuses_large_sizes():
    with pytest.raises(UsageError, match="Jacobian has"):
        gradscope.jacobian("x * 2", x="randn(1000)")


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_low_precision_dtypes_pass_on_smooth_functions(dtype):
    report = gradscope.check("sin(x) * exp(y) + x*y", x="randn(50)", y="randn(50)", dtype=dtype)
    assert report.passed, report.to_text()
    assert report.tolerances["rtol"] > 1e-6


def test_large_tensor_reports_worst_elements_only():
    report = gradscope.check("x * 2", x="randn(20000)")
    (x,) = report.inputs
    assert x.elements_reported == "worst"
    assert len(x.indices) == len(x.autograd) == len(x.values) == 50
    assert x.status_counts == {"ok": 20000}
    full = gradscope.check("x * 2", x="randn(20000)", full=True)
    assert full.inputs[0].elements_reported == "all" and len(full.inputs[0].autograd) == 20000


def test_worst_elements_put_problems_first():
    values = ",".join(["1"] * 30 + ["0"])  # one kink among many smooth points
    report = gradscope.check("abs(x)", x=values, max_elements=10)
    (x,) = report.inputs
    assert x.indices[0] == [30] and x.element_status[0] == "nondifferentiable"


def test_tensor_inputs_through_the_api():
    a = torch.tensor([1.0, 2.0], dtype=torch.float32)
    report = gradscope.check("a * a", a=a)
    assert report.inputs[0].autograd == [2.0, 4.0]


def test_fail_on_warning_fails_on_nondifferentiable():
    assert gradscope.check("abs(x)", x="0,1").passed
    assert not gradscope.check("abs(x)", x="0,1", fail_on="warning").passed


def test_unknown_input_names_are_refused():
    with pytest.raises(UsageError, match="neither one of its options nor an input"):
        gradscope.check("x*2", y="1")


def test_positional_inputs_to_an_expression_are_refused():
    with pytest.raises(UsageError, match="by name"):
        gradscope.check("x*2", torch.ones(2))


def test_output_that_is_the_input():
    report = gradscope.vjp("x", x="1,2", grad="3,4")
    assert report.inputs[0].autograd == [3.0, 4.0]


def test_timings_are_recorded():
    report = gradscope.check("x*2")
    assert set(report.timings) >= {"autograd", "symbolic", "finite_difference", "total"}


def test_max_fd_decides_sampling_and_raising_it_is_cheap_for_incremental_columns():
    sampled = gradscope.check("sum(sin(x)**2) * mean(cos(x))", x="randn(150000)", sample=20)
    (x,) = sampled.inputs
    assert x.finite_difference_mode == "sampled"  # past the default --max-fd of 100,000
    assert any("20 of 150,000 elements of x" in n for n in sampled.notes)
    # one changed element per column until sum/mean: every column costs O(1)
    whole = gradscope.check("sum(sin(x)**2) * mean(cos(x))", x="randn(300000)",
                            max_fd=1_000_000)
    (x,) = whole.inputs
    assert x.finite_difference_mode == "dense" and x.status_counts == {"ok": 300_000}


def test_large_dense_input_is_sampled_with_projections():
    report = gradscope.check("sum(sin(x)**2) * mean(cos(x))", x="randn(300)", max_fd=100,
                             sample=20)
    (x,) = report.inputs
    assert x.finite_difference_mode == "sampled" and report.passed
    assert x.status_counts == {"ok": 300}  # the symbolic engine covers the unsampled ones
    projections = [c for c in report.upstream_checks if c.label.startswith("random projection")]
    assert len(projections) == 3 and all(c.passed for c in projections)
    assert any("20 of 300 elements of x" in n for n in report.notes)


def test_sampled_python_target_marks_the_rest_unchecked_and_projections_catch_bugs():
    good = gradscope.check("sum(x * x)", x="randn(200)", max_fd=50, sample=5)
    assert good.passed
    report = gradscope.check(f"{DATA}/backwards.py:WrongAtLast", x="randn(200)", max_fd=50,
                             sample=5)
    (x,) = report.inputs
    assert x.status_counts.get("unchecked", 0) >= 190
    projections = [c for c in report.upstream_checks if c.label.startswith("random projection")]
    assert projections and not all(c.passed for c in projections)
    assert not report.passed


def test_large_elementwise_input_refines_doubted_two_point_estimates(monkeypatch):
    # exp(30x): the two-point truncation error (h·30)²/6 ≈ 1.5e-6 exceeds rtol 1e-6, so the
    # comparison doubts those estimates; refined to four points they agree
    n = TWO_POINT_FROM + 10
    report = gradscope.check("exp(30*x)", x=f"linspace(0,1,{n})")
    assert report.passed and report.inputs[0].status_counts == {"ok": n}
    assert all(c.passed for c in report.upstream_checks)
    # without the refinement the same check reports mismatches: the mechanism is what passes it
    monkeypatch.setattr(FiniteDifferences, "refine", lambda self, est, mask: (est, 0))
    doubted = gradscope.check("exp(30*x)", x=f"linspace(0,1,{n})")
    assert not doubted.passed and doubted.inputs[0].status_counts["mismatch"] > 1000


def test_large_outputs_get_one_random_upstream_and_it_still_catches_a_backward():
    n = 70_000
    report = gradscope.check("x * y", x=f"linspace(1,2,{n})", y=f"linspace(2,3,{n})")
    assert [c.label for c in report.upstream_checks] == [
        f"random upstream #1 (uniform(-1,1), seed {seed_for(0, ':upstream0')})"]
    # a backward that ignores grad_output's values is right for the ones upstream only
    blind = gradscope.check(f"{DATA}/backwards.py:BlindSquare", x=f"linspace(1,2,{n})", sample=50)
    assert blind.inputs[0].status_counts.get("mismatch", 0) == 0  # ones upstream: |1| = 1
    (random,) = [c for c in blind.upstream_checks if c.label.startswith("random upstream")]
    assert not random.passed and random.mismatches > 10  # about half of the 50 sampled
    assert not blind.passed


def test_large_elementwise_python_code_is_checked_at_every_element():
    from tests.evidence.test_custom_backward import SEEDS

    report = gradscope.check(f"{SEEDS}:RoundSTE", x="randn(100000)")
    (x,) = report.inputs
    assert report.passed and x.finite_difference_mode == "elementwise"
    assert x.status_counts == {"surrogate": 100_000}  # none `unchecked`
    assert any("elementwise in x" in n for n in report.notes)


def test_dense_python_code_with_a_large_jacobian_is_sampled_within_memory(monkeypatch):
    from gradscope.engines.fd import budget

    monkeypatch.setattr(budget, "MAX_STORED_ENTRIES", 1 << 20)  # 2^27 in use; smaller here
    # 5,000 × 5,000 Jacobian entries is more than finite differences keep: sampled, though
    # the input is below --max-fd
    report = gradscope.check(f"{DATA}/functions.py:cumulative", x="randn(5000)", sample=200)
    (x,) = report.inputs
    assert x.finite_difference_mode == "sampled" and x.status_counts == {
        "ok": 200, "unchecked": 4800}
    assert report.passed and any("1,048,576 entries" in n for n in report.notes)
    big = gradscope.check(f"{DATA}/functions.py:cumulative", x="randn(20000)", sample=1000)
    assert big.inputs[0].status_counts["ok"] == (1 << 20) // 20_000  # capped by memory
    assert any("capped at 52 columns" in n for n in big.notes)


def test_sampling_bounds_the_work_of_whole_evaluation_columns(monkeypatch):
    # each column of sum((x - mean(x))**2) reads or writes 200,000 elements four times (the
    # mean reads x, the difference, its square, the sum reads it): with a work bound of 2e7
    # element evaluations, 2e7 / (4 * 8e5) = 6 columns, whatever --sample asks for (the real
    # bound, 2e9, keeps a check at the 20M-element limit to seconds instead of hours)
    from gradscope.engines.fd import budget

    monkeypatch.setattr(budget, "MAX_DENSE_WORK", 2e7)
    report = gradscope.check("sum((x - mean(x))**2)", x="randn(200000)")
    (x,) = report.inputs
    assert x.finite_difference_mode == "sampled" and x.status_counts["ok"] == 200_000
    assert any("capped at 6 columns" in n for n in report.notes)


def test_expensive_targets_sample_their_columns_by_counted_flops(monkeypatch):
    # one evaluation of x @ y costs more than its 200 elements say (2,000 flops, counted, never
    # timed); with a budget of 1 flop a single column is differenced and the projections
    # cover the rest
    from gradscope.engines.fd import budget

    monkeypatch.setattr(budget, "MAX_DENSE_FLOPS", 1.0)
    report = gradscope.check("sum(tanh(x @ y))", x="randn(10,10)", y="randn(10,10)")
    assert {i.finite_difference_mode for i in report.inputs} == {"sampled"}
    assert report.passed and any("capped at 1 columns" in n for n in report.notes)
    assert any("one evaluation performs 2,000" in n for n in report.notes)


def test_outputs_and_intermediates_are_bounded_before_anything_is_computed():
    from gradscope.errors import UsageError

    with pytest.raises(UsageError, match=r"`a \+ b` would make 64,000,000 elements"):
        gradscope.check("a + b", shape={"a": (8000, 1), "b": (1, 8000)})
    with pytest.raises(UsageError, match="limited like inputs to 1,000"):
        gradscope.check("sum(x * y)", shape={"x": (40, 1), "y": (1, 40)},
                        max_elements_total=1000)
    assert gradscope.check("sum(x * y)", shape={"x": (20, 1), "y": (1, 20)},
                           max_elements_total=1000).passed


def test_a_verdict_that_skipped_finite_differences_says_so():
    report = gradscope.check(f"{DATA}/targets.py:forward_raises_when_perturbed", x="1,2")
    assert report.skipped == ["x"] and "finite differences skipped for x" in report.to_text()


def test_seed_makes_module_construction_and_reports_reproducible():
    import json
    import random

    from tests.paths import EXAMPLES

    def run_once():
        report = gradscope.check(f"{EXAMPLES}/seed_functions.py:MyLayer", init={"size": 3},
                                 input="1,2,3")
        data = json.loads(report.to_json())
        data.pop("timings")
        return data

    torch.manual_seed(123)
    random.seed(123)
    before = (torch.rand(1).item(), random.random())
    torch.manual_seed(123)
    random.seed(123)
    first, second = run_once(), run_once()
    assert first == second  # the same command twice: the same JSON apart from timings
    after = (torch.rand(1).item(), random.random())
    assert after == before  # the caller's random state is neither used nor changed
    other = gradscope.check(f"{EXAMPLES}/seed_functions.py:MyLayer", init={"size": 3},
                            input="1,2,3", seed=1)
    assert other.inputs[-1].values != first["inputs"][-1]["values"]


def test_timings_count_the_calls_of_the_users_code_per_engine(tmp_path):
    import gradscope

    src, seen = tmp_path / "solver.py", tmp_path / "calls.txt"
    src.write_text(
        f"import torch\nSEEN = {str(seen)!r}\n\n"
        "def solve(x):\n"
        "    with open(SEEN, 'a') as f:\n"
        "        f.write('.')\n"
        "    y = x.detach().clone()\n"
        "    for _ in range(50):\n"
        "        step = (y**3 + y - x.detach()) / (3 * y**2 + 1)\n"
        "        y = y - step\n"
        "        if float(step.abs().max()) < 1e-13:\n"
        "            break\n"
        "    y = y.detach()\n"
        "    return y - (y**3 + y - x) / (3 * y**2 + 1)\n")
    report = gradscope.check(f"{src}:solve", shape={"x": (6,)})
    calls = {k: v for k, v in report.timings.items() if k.startswith("calls.")}
    assert report.passed and calls["calls.autograd"] >= 1
    assert calls["calls.total"] >= calls["calls.autograd"] + calls["calls.finite_difference"]
    assert calls["calls.total"] == len(seen.read_text())  # every call the user's code saw
    assert "calls.total" not in gradscope.check("x * 2").timings
