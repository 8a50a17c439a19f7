"""The symbolic engine: block decomposition, formulas, vectorised evaluation, forward mode."""

from __future__ import annotations

import time

import pytest
import torch

from gradscope.engines.symbolic import SymbolicEngine
from gradscope.expr.parse import parse


def _t(*v):
    return torch.tensor(v, dtype=torch.float64)


def _autograd(expr_fn, values, upstream):
    leaves = {k: v.clone().requires_grad_() for k, v in values.items()}
    out = expr_fn(**leaves)
    out.backward(upstream)
    return {k: v.grad for k, v in leaves.items()}


def test_formulas_of_the_seed_expression():
    engine = SymbolicEngine(parse("3*a + 2*b*b + log(c)"), {"a": _t(1), "b": _t(2), "c": _t(3)})
    assert engine.formulas("v") == {"a": "3*v", "b": "4*b*v", "c": "v/c"}


def test_formula_through_reductions_names_the_reduction():
    engine = SymbolicEngine(parse("sum(round(x) * w)"), {"x": _t(1, 2), "w": _t(3, 4)})
    f = engine.formulas("v")
    assert f["x"] == "0" and f["w"] == "v*round(x)"


def test_vjp_through_mixed_structure_matches_autograd():
    gen = torch.Generator().manual_seed(0)
    vals = {k: torch.randn(3, 3, generator=gen, dtype=torch.float64) for k in "AB"}
    e = parse("softmax(A, 0) * logsumexp(B, 1) + A @ sin(B) - max(A * B) + norm(B)")
    engine = SymbolicEngine(e, vals)
    v = torch.randn(3, 3, generator=gen, dtype=torch.float64)
    want = _autograd(lambda A, B: torch.softmax(A, 0) * B.logsumexp(1) + A @ torch.sin(B)
                     - (A * B).amax() + torch.linalg.vector_norm(B), vals, v)
    got = engine.vjp(v)
    for k in "AB":
        assert torch.allclose(got[k], want[k], atol=1e-12)


def test_broadcasting_is_undone():
    vals = {"x": torch.randn(2, 3, dtype=torch.float64), "y": torch.randn(3, dtype=torch.float64),
            "s": _t(2.0)[0]}
    engine = SymbolicEngine(parse("x * y * s + y"), vals)
    got = engine.vjp(torch.ones(2, 3, dtype=torch.float64))
    assert got["y"].shape == (3,) and got["s"].shape == ()
    assert torch.allclose(got["y"], (vals["x"] * vals["s"]).sum(0) + 2)


def test_simplified_away_terms_keep_their_broadcast_shape():
    # sympy turns x*0 + y into y; the sum must still count the broadcast copies.
    vals = {"x": torch.ones(5, dtype=torch.float64), "y": _t(2.0)[0]}
    engine = SymbolicEngine(parse("sum(x*0 + y)"), vals)
    assert float(engine.output) == 10.0
    assert float(engine.vjp(torch.tensor(1.0, dtype=torch.float64))["y"]) == 5.0


def test_repeated_subterm_shares_one_adjoint():
    engine = SymbolicEngine(parse("sum(x) * sum(x)"), {"x": _t(1, 2)})
    assert engine.vjp(torch.tensor(1.0, dtype=torch.float64))["x"].tolist() == [6.0, 6.0]


def test_forward_mode_matches_torch_func_jvp():
    x = torch.randn(4, dtype=torch.float64)
    t = torch.randn(4, dtype=torch.float64)
    engine = SymbolicEngine(parse("sum(sin(x)**2) * mean(cos(x)) + prod(x)"), {"x": x})
    _, want = torch.func.jvp(lambda z: (torch.sin(z) ** 2).sum() * torch.cos(z).mean()
                             + z.prod(), (x,), (t,))
    assert torch.allclose(engine.jvp({"x": t}), want, atol=1e-12)


def test_where_piecewise():
    engine = SymbolicEngine(parse("where(x > 0, x**2, -x)"), {"x": _t(-1, 2)})
    assert engine.vjp(_t(1, 1))["x"].tolist() == [-1.0, 4.0]


def test_million_elements_evaluate_fast():
    x = torch.rand(1_000_000, dtype=torch.float64) + 0.5
    tic = time.perf_counter()
    engine = SymbolicEngine(parse("exp(sin(x)) * log(x) + sqrt(x) * tanh(x) / (1 + x**2)"),
                            {"x": x})
    grad = engine.vjp(torch.ones_like(x))["x"]
    elapsed = time.perf_counter() - tic
    assert grad.shape == x.shape and bool(torch.isfinite(grad).all())
    assert elapsed < 10  # generous: the point is "not one symbol per element"


@pytest.mark.parametrize("expr", ["x @ y", "dot(x, y)"])
def test_bilinear_products(expr):
    vals = {"x": _t(1, 2, 3), "y": _t(4, 5, 6)}
    got = SymbolicEngine(parse(expr), vals).vjp(torch.tensor(2.0, dtype=torch.float64))
    assert got["x"].tolist() == [8.0, 10.0, 12.0] and got["y"].tolist() == [2.0, 4.0, 6.0]
