"""The finite-difference engine: accuracy, batching, kink detection, error estimates."""

from __future__ import annotations

import pytest
import torch

from gradscope.engines.fd.batcher import Batcher
from gradscope.engines.fd.engine import FiniteDifferences
from gradscope.engines.fd.policy import DEFAULT_EPS
from gradscope.engines.fd.stencil import TWO_POINT_FROM
from gradscope.targets import resolve
from tests.paths import DATA


def _fd(expr, two_point_from=TWO_POINT_FROM, **values):
    target = resolve(expr)
    vals = {k: torch.tensor(v, dtype=torch.float64) for k, v in values.items()}
    return FiniteDifferences(target.traced, vals, eps=DEFAULT_EPS,
                             elementwise=target.elementwise_inputs,
                             two_point_from=two_point_from), target


def test_small_elementwise_input_costs_four_calls_and_is_extrapolated():
    x = torch.linspace(-1, 1, 1000, dtype=torch.float64)
    fd, _ = _fd("exp(x) * y", x=x.tolist(), y=[2.0] * 1000)
    col = fd.estimate("x")
    assert col.mode == "elementwise" and col.forward_calls == 4
    assert col.points.unique().tolist() == [4]
    grad, err = col.vjp(torch.ones(1000, dtype=torch.float64))
    assert torch.allclose(grad, 2 * torch.exp(x), rtol=1e-11)
    assert bool((err < 1e-8).all()) and bool((err > 0).all())


def test_large_elementwise_input_costs_two_calls_whatever_its_size():
    x = torch.linspace(-1, 1, 10000, dtype=torch.float64)
    fd, _ = _fd("exp(x) * y", x=x.tolist(), y=[2.0] * 10000, two_point_from=10000)
    col = fd.estimate("x")
    assert col.mode == "elementwise" and col.forward_calls == 2
    assert col.points.unique().tolist() == [2]
    grad, err = col.vjp(torch.ones(10000, dtype=torch.float64))
    want = 2 * torch.exp(x)
    assert torch.allclose(grad, want, rtol=1e-8)  # h²/6 truncation, h = 1e-4
    assert bool((err < 1e-10).all()) and bool((err > 0).all())  # round-off only


def test_elementwise_refinement_extrapolates_only_the_doubted_elements():
    x = torch.linspace(-1, 1, 1000, dtype=torch.float64)
    fd, _ = _fd("exp(3*x)", x=x.tolist(), two_point_from=1)
    first = fd.estimate("x")
    before = first.partial.clone()
    doubted = torch.zeros(1000, dtype=torch.bool)
    doubted[[3, 500, 999]] = True
    col, count = fd.refine(first, doubted)
    assert count == 3 and col is not first and torch.equal(first.partial, before)
    assert bool((first.points == 2).all())  # estimates are immutable: a new one is made
    assert col.forward_calls == 2 + 4
    assert col.points[doubted].tolist() == [4, 4, 4] and int((col.points == 2).sum()) == 997
    want = 3 * torch.exp(3 * x)
    assert torch.equal(col.partial[~doubted], before[~doubted])
    refined = (col.partial[doubted] - want[doubted]).abs() / want[doubted]
    two_point = (before[doubted] - want[doubted]).abs() / want[doubted]
    assert bool((refined < 1e-11).all()) and bool((two_point > 1e-9).all())
    assert bool((col.error[doubted] < 1e-7 * want[doubted]).all())
    assert fd.refine(col, doubted) == (col, 0)  # already refined


def test_dense_input_uses_vmap_batches():
    fd, _ = _fd("sum(sin(x)**2) * mean(cos(x))", x=[0.1, 0.2, 0.3])
    col = fd.estimate("x")
    assert col.mode == "dense" and col.note == "vmap batches"
    x = torch.tensor([0.1, 0.2, 0.3], dtype=torch.float64, requires_grad=True)
    ((torch.sin(x) ** 2).sum() * torch.cos(x).mean()).backward()
    grad, _ = col.vjp(torch.tensor(1.0, dtype=torch.float64))
    assert torch.allclose(grad, x.grad, rtol=1e-9)


def test_dense_jacobian_columns():
    fd, _ = _fd("softmax(x)", x=[1.0, 2.0, 3.0])
    jac, _ = fd.estimate("x").jacobian()
    want = torch.autograd.functional.jacobian(lambda z: torch.softmax(z, 0),
                                              torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64))
    assert torch.allclose(jac, want, atol=1e-10)


def test_elementwise_jacobian_is_diagonal_with_broadcast():
    fd, _ = _fd("x * y", x=[[1.0], [2.0]], y=[3.0, 4.0, 5.0])
    jac, _ = fd.estimate("y").jacobian()
    assert jac.shape == (6, 3)
    want = torch.tensor([[1, 0, 0], [0, 1, 0], [0, 0, 1], [2, 0, 0], [0, 2, 0], [0, 0, 2]],
                        dtype=torch.float64)
    assert torch.allclose(jac, want, atol=1e-10)


def test_kinks_are_flagged_per_op_and_refined():
    fd, target = _fd("abs(x) + clamp(x, 0, 1)", x=[0.0, 1e-6, 0.5, 1.0, 2.0])
    col = fd.estimate("x")
    assert col.kink.tolist() == [True, False, False, True, False]
    sites = [s.where for s in target.branch_sites]
    assert sites == ["abs(x)", "clamp(x, 0, 1)"]
    assert col.kink_by_branch[0].tolist() == [True, False, False, False, False]
    assert col.kink_by_branch[1].tolist() == [True, False, False, True, False]
    assert col.forward_calls > 4  # the element at 1e-6 needed smaller steps


def test_jump_without_branch_info_is_caught_by_convergence():
    # A traced function that reports no branches: the error estimate must expose the jump.
    def traced(values):
        return torch.floor(values["x"]), []

    fd = FiniteDifferences(traced, {"x": torch.tensor([1.0, 0.3], dtype=torch.float64)},
                           eps=DEFAULT_EPS, elementwise={"x"}, two_point_from=1)
    col = fd.estimate("x")
    # the two-point estimate at the jump is huge (1/2h) and not yet known to be wrong; a
    # comparison doubts it, and the extrapolated estimate then shows it never converges
    assert float(col.partial[0]) > 1e3 and col.kink.tolist() == [False, False]
    col, _ = fd.refine(col, torch.tensor([True, True]))
    assert col.kink.tolist() == [True, False]


def test_directional_derivative():
    fd, _ = _fd("x * y", x=[1.0, 2.0], y=[3.0, 4.0])
    d = fd.directional({"x": torch.tensor([1.0, 1.0]), "y": torch.tensor([0.0, 1.0])})
    assert torch.allclose(d.value, torch.tensor([3.0, 6.0], dtype=torch.float64))
    assert not bool(d.kink.any())


def test_loop_fallback_when_vmap_fails():
    def traced(values):
        x = values["x"]
        # .item() has no batching rule: vmap fails, the loop must take over
        return torch.stack([x.sum() * float(x.sum().item() != 12345)]), []

    fd = FiniteDifferences(traced, {"x": torch.tensor([1.0, 2.0], dtype=torch.float64)},
                           eps=DEFAULT_EPS, elementwise=set())
    col = fd.estimate("x")
    assert col.note.startswith("per-element loop")
    assert torch.allclose(col.partial, torch.ones(1, 2, dtype=torch.float64))


def test_dense_columns_start_with_two_points_and_refine_on_demand():
    fd, _ = _fd("sum(exp(x))", x=[0.1, 0.2, 0.3])
    first = fd.estimate("x")
    assert first.points.tolist() == [2, 2, 2] and first.forward_calls == 6
    col, count = fd.refine(first, torch.tensor([False, True, False]))
    assert count == 1 and first.points.tolist() == [2, 2, 2]
    assert col.points.tolist() == [2, 4, 2] and col.forward_calls == 10
    x = torch.tensor([0.1, 0.2, 0.3], dtype=torch.float64)
    assert torch.allclose(col.partial[0], torch.exp(x), rtol=1e-7)
    assert float(col.error[0, 1]) > float(col.error[0, 0])  # now with a truncation bound
    assert fd.refine(col, torch.tensor([False, True, False]))[1] == 0  # already refined


def test_python_jump_is_found_after_refinement():
    import gradscope

    report = gradscope.check(f"{DATA}/functions.py:floor_plus", x="1.0,0.3,2.5")
    assert report.inputs[0].element_status == ["nondifferentiable", "ok", "ok"]
    assert report.passed


def _python_fd(fn, x, **kw):
    def traced(values):
        return fn(values["x"]), []

    return FiniteDifferences(traced, {"x": x}, eps=DEFAULT_EPS, elementwise=set(), probe=True,
                             **kw)


def test_probe_finds_elementwise_python_code_in_two_log_n_calls():
    x = torch.linspace(-2, 2, 5000, dtype=torch.float64)
    fd = _python_fd(lambda t: t * torch.sigmoid(t), x)
    assert fd.is_elementwise("x") and fd.probed["x"] == 2 * 13  # 5000 < 2**13
    col = fd.estimate("x")
    assert col.mode == "elementwise" and col.forward_calls == 4
    s = torch.sigmoid(x)
    assert torch.allclose(col.partial, s + x * s * (1 - s), rtol=1e-9)


def test_probe_sees_a_single_cross_dependence_anywhere():
    x = torch.linspace(-2, 2, 5000, dtype=torch.float64)

    def one_pair(t):  # elementwise except that output 4321 also reads element 17
        out = t * t
        return out + torch.nn.functional.one_hot(torch.tensor(4321), 5000) * t[17]

    for fn in (one_pair, lambda t: torch.roll(t, 1), lambda t: torch.cumsum(t, 0)):
        fd = _python_fd(fn, x)
        assert not fd.is_elementwise("x") and "x" in fd.probed


def test_probe_follows_broadcasting_and_skips_small_inputs():
    x = torch.linspace(-1, 1, 2000, dtype=torch.float64).reshape(2000, 1)
    fd = _python_fd(lambda t: torch.sin(t) * torch.ones(2000, 3, dtype=torch.float64), x)
    assert fd.is_elementwise("x")
    small = _python_fd(torch.sin, torch.linspace(-1, 1, 100, dtype=torch.float64))
    assert not small.is_elementwise("x") and "x" not in small.probed  # dense is cheap there


def test_cost_is_counted_not_timed():
    import time

    def traced(values):
        time.sleep(0.01)  # a slow machine changes nothing below
        return (values["x"] @ values["x"].T).sum().reshape(1), []

    fd = FiniteDifferences(traced, {"x": torch.ones(4, 5, dtype=torch.float64)},
                           eps=DEFAULT_EPS, elementwise=set())
    assert fd.flops() == 2 * 4 * 5 * 4 and fd.flops() == fd.flops()
    assert not hasattr(fd, "eval_seconds")


def test_depends_tells_a_step_from_an_ignored_element():
    # round(x)·[1, 1, 0]: flat everywhere; the third element is ignored at every value
    def fn(values):
        x = values["x"]
        return torch.round(x) * torch.tensor([1.0, 1.0, 0.0], dtype=x.dtype), []

    fd = FiniteDifferences(fn, {"x": torch.tensor([0.2, 2.3, 0.4], dtype=torch.float64)},
                           eps=DEFAULT_EPS, elementwise=set())
    assert fd.depends("x", torch.arange(3)).tolist() == [True, True, False]
    # past the budget, elements are probed in groups: a group that moves counts for all
    assert fd.depends("x", torch.arange(3), budget=0).tolist() == [True, True, True]
    # an elementwise input is probed all at once, each output element answering for its own
    fd.elementwise.add("x")
    assert fd.depends("x", torch.arange(3), budget=0).tolist() == [True, True, False]
    assert fd.depends("x", torch.tensor([2, 0])).tolist() == [False, True]


def test_a_lower_precision_output_is_read_in_float64_with_its_round_off():
    def fn(values):
        return torch.tanh(values["x"]).float(), []

    x = torch.linspace(-1, 1, 5, dtype=torch.float64)
    fd = FiniteDifferences(fn, {"x": x}, eps=5e-3, elementwise=set(),
                           round_off=torch.float32)
    est = fd.estimate("x")
    assert fd.out.dtype == torch.float64 and fd.point.machine_eps == torch.finfo(torch.float32).eps
    grad, err = est.vjp(torch.ones(5, dtype=torch.float64))
    exact = 1 - torch.tanh(x) ** 2
    assert bool(((grad - exact).abs() <= 3 * err + 1e-5).all())


def _wide(values):
    """Small in, small out, a 200-fold wider intermediate (the shape of a CNN or an MLP)."""
    x = values["x"]
    hidden = torch.tanh(x.unsqueeze(-1) * torch.linspace(0.1, 1.0, 200, dtype=x.dtype))
    return hidden.mean(-1), []


def test_batches_count_activations_and_halve_on_allocation_failure(monkeypatch):
    x = torch.linspace(-1, 1, 40, dtype=torch.float64)
    fd = FiniteDifferences(_wide, {"x": x}, eps=DEFAULT_EPS, elementwise=set())
    assert fd.point.activations() >= 40 * 200  # the hidden layer, not just 40 in and 40 out
    original = Batcher._copies
    sizes = []

    def scarce(self, name, x, idx, h, points):
        sizes.append(len(idx))
        if len(idx) > 8:
            raise RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: "
                               "can't allocate memory")
        return original(self, name, x, idx, h, points)

    monkeypatch.setattr(Batcher, "_copies", scarce)
    grad, _ = fd.estimate("x").vjp(torch.ones(40, dtype=torch.float64))
    exact = (torch.linspace(0.1, 1.0, 200, dtype=torch.float64)
             / torch.cosh(x.unsqueeze(-1) * torch.linspace(0.1, 1.0, 200,
                                                           dtype=torch.float64)) ** 2).mean(-1)
    assert torch.allclose(grad, exact, rtol=1e-6)
    assert fd.batcher.memory_cap["x"] <= 8 and max(sizes) > 8  # tried, halved, remembered
    with pytest.raises(RuntimeError, match="boom"):  # other errors are not retried
        monkeypatch.setattr(Batcher, "_copies",
                            lambda *a: (_ for _ in ()).throw(RuntimeError("boom")))
        FiniteDifferences(_wide, {"x": x}, eps=DEFAULT_EPS, elementwise=set()).estimate("x")
