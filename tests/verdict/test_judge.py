"""The judge: masks from finite differences, re-marking decided by the diagnoses, doubted
two-point estimates, and shared work computed once."""

from __future__ import annotations

import torch

from gradscope.engines.autograd import AutogradEngine
from gradscope.engines.fd import FiniteDifferences
from gradscope.engines.symbolic import SymbolicEngine
from gradscope.targets import resolve
from gradscope.verdict.judge import Judge
from gradscope.verdict.tolerance import DEFAULT_EPS, Tolerance


def _judge(expr: str, **values: list[float]) -> Judge:
    target = resolve(expr)
    vals = {n: torch.tensor(values[n], dtype=torch.float64) for n in target.names}
    fd = FiniteDifferences(target.traced, vals, eps=DEFAULT_EPS,
                           elementwise=target.elementwise_inputs)
    estimates = {n: fd.estimate(n) for n in target.names}
    return Judge(target.names, AutogradEngine(target.forward, vals),
                 SymbolicEngine(target.expression, vals), fd, estimates,
                 Tolerance.for_dtype("float64"), seed=0)


def test_a_kink_in_the_stencil_is_nondifferentiable_not_a_mismatch():
    judge = _judge("abs(x)", x=[0.0, 1.0])
    ones = torch.ones(2, dtype=torch.float64)
    fd, err = judge.estimates["x"].vjp(ones)
    cmp = judge.compare("x", judge.autograd.vjp(ones)["x"], None, fd, err)
    assert cmp.counts() == {"ok": 1, "nondifferentiable": 1}


def test_vanishing_inputs_are_re_marked_and_a_gradient_on_a_step_is_a_surrogate():
    judge = _judge("round(x) * 2", x=[0.2, 1.7])
    ones = torch.ones(2, dtype=torch.float64)
    ag = judge.autograd.vjp(ones)["x"]
    assert judge.compare("x", ag, torch.zeros(2, dtype=torch.float64), None, None).worst() == "ok"
    judge.vanishing.add("x")
    assert judge.compare("x", ag, torch.zeros(2, dtype=torch.float64), None,
                         None).counts() == {"vanishing": 2}
    # a gradient where the forward is a flat step is a surrogate, whatever made it
    fd, err = judge.estimates["x"].vjp(ones)
    wrong = judge.compare("x", ag + 1, None, fd, err)
    assert wrong.counts() == {"surrogate": 2} and judge.surrogates == {"x"}


def test_a_wrong_gradient_where_the_forward_moves_is_a_mismatch():
    judge = _judge("x * 2", x=[0.2, 1.7])
    ones = torch.ones(2, dtype=torch.float64)
    fd, err = judge.estimates["x"].vjp(ones)
    wrong = judge.compare("x", judge.autograd.vjp(ones)["x"] + 1, None, fd, err)
    assert wrong.counts() == {"mismatch": 2} and not judge.surrogates
    assert list(judge.seen) == ["x"]  # kept for the relations


def test_declared_inputs_have_their_mismatches_excused_but_recorded():
    judge = _judge("x * 2", x=[0.2, 1.7])
    judge.declared = {"x": "declared with --surrogate"}
    ones = torch.ones(2, dtype=torch.float64)
    fd, err = judge.estimates["x"].vjp(ones)
    wrong = judge.compare("x", judge.autograd.vjp(ones)["x"] * -0.5, None, fd, err)
    assert wrong.counts() == {"surrogate": 2}
    assert judge.seen["x"].comparison.counts() == {"mismatch": 2}


def test_random_upstreams_and_jacobians_are_computed_once():
    judge = _judge("sin(x) * y", x=[0.1, 0.2], y=[1.0, 2.0])
    first = judge.random_upstreams()
    assert len(first) == 2 and judge.random_upstreams() is first
    ag, sym, fd = judge.jacobians()
    assert torch.allclose(ag["x"], sym["x"]) and torch.allclose(fd["x"][0], sym["x"])
    assert judge.jacobians()[0] is ag
    cmps = judge.jacobian_comparisons()
    assert all(c.worst() == "ok" for c in cmps.values())
