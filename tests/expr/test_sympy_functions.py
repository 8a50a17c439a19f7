"""gradscope's sympy functions differentiate the way torch does at kinks and jumps, and each
carries the torch function that evaluates it."""

import sympy as sp
import torch

from gradscope.expr import sympy_functions as sf

x = sp.Symbol("x", real=True)
AT = torch.tensor([-1.0, 0.0, 1.0], dtype=torch.float64)


def _evaluate(expr: sp.Expr) -> torch.Tensor:
    """Evaluate a derivative made of one gradscope function of x at -1, 0, 1."""
    (fn,) = [f for f in expr.atoms(sp.Function) if isinstance(f, sf.TorchFunction)]
    args = [AT if a == x else torch.full_like(AT, float(a)) for a in fn.args]
    return type(fn).torch_impl(*args)


def test_kinks_follow_torch_conventions():
    assert torch.equal(_evaluate(sp.diff(sf.relu(x), x)), torch.tensor([0.0, 0.0, 1.0],
                                                                         dtype=torch.float64))
    assert torch.equal(_evaluate(sp.diff(sf.abs_(x), x)), torch.sign(AT))  # abs'(0) = 0
    assert sp.diff(sf.round_(x), x) == 0 and sp.diff(sf.floor(x), x) == 0
    clamp = sp.diff(sf.clamp(x, sp.Integer(0), sp.Integer(1)), x)
    assert torch.equal(_evaluate(clamp), torch.tensor([0.0, 1.0, 1.0], dtype=torch.float64))


def test_each_function_carries_its_torch_form():
    assert torch.equal(sf.relu.torch_impl(AT), torch.relu(AT))
    assert torch.equal(sf.round_.torch_impl(AT + 0.4), torch.round(AT + 0.4))


def test_clamp_with_crossed_bounds_follows_torch():
    # lo > hi: torch's result is hi whatever x is, and the whole gradient goes to hi
    x_, lo, hi = (torch.tensor(v, dtype=torch.float64, requires_grad=True)
                  for v in ([0.5, 2.0, -1.0], [1.0] * 3, [0.0] * 3))
    torch.clamp(x_, lo, hi).sum().backward()
    sym = sf.clamp(x, sp.Symbol("lo", real=True), sp.Symbol("hi", real=True))
    for arg, want in ((x, x_.grad), (sp.Symbol("lo", real=True), lo.grad),
                      (sp.Symbol("hi", real=True), hi.grad)):
        got = sp.diff(sym, arg)
        values = [float(got.subs({x: a, sp.Symbol("lo", real=True): 1.0,
                                  sp.Symbol("hi", real=True): 0.0}).replace(
            lambda e: isinstance(e, sf.TorchFunction),
            lambda e: sp.Float(float(type(e).torch_impl(
                *[torch.tensor(float(v), dtype=torch.float64) for v in e.args])))))
            for a in (0.5, 2.0, -1.0)]
        assert values == want.tolist(), arg
