"""The op table: for every elementwise row, the sympy form's derivative (torch's convention)
matches torch autograd, and branch ids change exactly across kinks."""

from __future__ import annotations

import pytest
import sympy as sp
import torch

from gradscope.engines.sympy_eval import SympyEvaluator
from gradscope.expr.ops import ELEMENTWISE, FUNCTIONS, OPS

ELEMENTWISE_ROWS = [op for op in OPS.values() if op.kind == ELEMENTWISE and op.name != "where"
                    and op.expression]  # (clamp_min_passing: a decomposition's own)
# static parameters a row requires (no default), and ones worth trying off their default
PARAMS = {"threshold": {"threshold": 0.1, "value": 20.0}, "leaky_relu": {"negative_slope": 0.2},
          "elu": {"alpha": 0.5}, "celu": {"alpha": 2.0}, "hardtanh": {"min_val": -0.5},
          "softplus": {"beta": 2.0, "threshold": 3.0}, "logit": {"eps": 0.2},
          "softshrink": {"lambd": 0.3}, "hardshrink": {"lambd": 0.3}, "polygamma": {"n": 2}}


def _points(op, n=64):
    gen = torch.Generator().manual_seed(0)
    lo, hi = op.domain or (-2.0, 2.0)
    return [lo + (hi - lo) * torch.rand(n, generator=gen, dtype=torch.float64)
            for _ in range(op.arity[0])]


@pytest.mark.parametrize("op", ELEMENTWISE_ROWS, ids=lambda op: op.name)
def test_sympy_derivative_matches_torch(op):
    args = _points(op)
    if op.name == "clamp":
        args[1], args[2] = torch.full_like(args[1], -0.5), torch.full_like(args[2], 0.5)
    if op.name in ("pow", "remainder", "fmod"):
        args[0] = args[0].abs() + 0.1
    if op.name in ("remainder", "fmod"):
        args[1] = args[1].abs() + 0.5
    params = PARAMS.get(op.name, {})
    leaves = [a.clone().requires_grad_() for a in args]
    out = op.torch(*leaves, **params)
    grads = torch.autograd.grad(out.sum(), leaves, allow_unused=True)
    syms = [sp.Symbol(f"s{i}", real=True) for i in range(len(args))]
    expr = op.sympy(*syms, **params)
    ev = SympyEvaluator(dict(zip(syms, args, strict=True)), torch.float64, torch.device("cpu"))
    derivs = ev.evaluate([sp.diff(expr, s) for s in syms])
    value = ev.evaluate([expr])[0]
    assert torch.allclose(value.expand_as(out), out.detach(), rtol=1e-12, atol=1e-12)
    # torch's hardsigmoid backward multiplies by 1/6 rounded to float32, even in float64
    rtol = 1e-7 if op.name == "hardsigmoid" else 1e-10
    for g, d in zip(grads, derivs, strict=True):
        g = torch.zeros_like(args[0]) if g is None else g
        assert torch.allclose(d.expand_as(g), g, rtol=rtol, atol=1e-12), op.name


@pytest.mark.parametrize("name, at, kink", [
    ("abs", [-1e-3, 1e-3], True), ("abs", [1.0, 2.0], False),
    ("relu", [-1e-3, 1e-3], True), ("round", [0.49, 0.51], True), ("round", [0.3, 0.4], False),
    ("floor", [0.99, 1.01], True), ("sign", [-1.0, 1.0], True), ("frac", [0.9, 1.1], True),
    ("div", None, True), ("tan", [1.5, 1.6], True), ("tan", [0.1, 0.2], False),
])
def test_branch_changes_across_kinks(name, at, kink):
    op = OPS[name]
    if name == "div":
        a, b = torch.ones(1), torch.tensor([-1e-3])
        changed = op.branch(a, b) != op.branch(a, -b)
    else:
        x0, x1 = (torch.tensor([v], dtype=torch.float64) for v in at)
        changed = op.branch(x0) != op.branch(x1)
    assert bool(changed) is kink


def test_vanishing_ops_are_piecewise_constant():
    assert {n for n, op in OPS.items() if op.vanishing} == {"round", "floor", "ceil", "trunc",
                                                            "angle", "sign"}


def test_every_function_has_a_summary_and_torch_impl():
    for op in FUNCTIONS.values():
        assert op.summary and callable(op.torch)


@pytest.mark.parametrize("name", ["sum", "mean", "prod", "max", "min", "norm", "logsumexp",
                                  "softmax"])
@pytest.mark.parametrize("dim", [None, 0, 1])
def test_structural_adjoints_match_autograd(name, dim):
    op = OPS[name]
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(3, 4, generator=gen, dtype=torch.float64)
    leaf = x.clone().requires_grad_()
    out = op.torch(leaf, dim=dim)
    g = torch.randn(out.shape, generator=gen, dtype=torch.float64)
    (want,) = torch.autograd.grad(out, leaf, g)
    (got,) = op.vjp(g, out.detach(), [x], {"dim": dim})
    assert torch.allclose(got, want, atol=1e-12)
    t = torch.randn(3, 4, generator=gen, dtype=torch.float64)
    _, want_t = torch.func.jvp(lambda z: op.torch(z, dim=dim), (x,), (t,))
    assert torch.allclose(op.jvp([t], out.detach(), [x], {"dim": dim}), want_t, atol=1e-12)


def test_prod_adjoint_exact_with_zeros():
    x = torch.tensor([0.0, 2.0, 3.0, 0.0, 5.0], dtype=torch.float64)
    (got,) = OPS["prod"].vjp(torch.tensor(1.0, dtype=torch.float64), x.prod(), [x], {})
    assert got.tolist() == [0.0, 0.0, 0.0, 0.0, 0.0]
    y = torch.tensor([0.0, 2.0, 3.0], dtype=torch.float64)
    (got,) = OPS["prod"].vjp(torch.tensor(1.0, dtype=torch.float64), y.prod(), [y], {})
    assert got.tolist() == [6.0, 0.0, 0.0]


@pytest.mark.parametrize("sa, sb", [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 2)),
                                    ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)), ((2, 3), (5, 3, 4))])
def test_matmul_adjoints_match_autograd(sa, sb):
    gen = torch.Generator().manual_seed(2)
    a = torch.randn(sa, generator=gen, dtype=torch.float64)
    b = torch.randn(sb, generator=gen, dtype=torch.float64)
    la, lb = a.clone().requires_grad_(), b.clone().requires_grad_()
    out = la @ lb
    g = torch.randn(out.shape, generator=gen, dtype=torch.float64)
    want = torch.autograd.grad(out, (la, lb), g)
    got = OPS["matmul"].vjp(g, out.detach(), [a, b], {})
    for w, x in zip(want, got, strict=True):
        assert torch.allclose(w, x, atol=1e-12)
