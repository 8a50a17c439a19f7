"""sympy expressions evaluated on tensors by a table-driven walker (never lambdify): values,
shared subterms, relations, and gradscope's own functions with torch's conventions."""

from __future__ import annotations

import sympy as sp
import torch

from gradscope.engines.sympy_eval import SympyEvaluator


def _env(**values):
    symbols = {n: sp.Symbol(n, real=True) for n in values}
    env = {symbols[n]: torch.tensor(v, dtype=torch.float64) for n, v in values.items()}
    return symbols, SympyEvaluator(env, torch.float64, torch.device("cpu"))


def test_values_match_torch():
    s, ev = _env(x=[0.5, 2.0], y=[1.0, 3.0])
    x, y = s["x"], s["y"]
    (out,) = ev.evaluate([sp.sin(x) * y + sp.exp(-x) / y + x ** 3])
    tx, ty = torch.tensor([0.5, 2.0], dtype=torch.float64), torch.tensor([1.0, 3.0],
                                                                           dtype=torch.float64)
    assert torch.allclose(out, torch.sin(tx) * ty + torch.exp(-tx) / ty + tx ** 3)


def test_several_expressions_share_their_subterms_and_constants_broadcast():
    s, ev = _env(x=[1.0, 2.0, 3.0])
    x = s["x"]
    a, b, c = ev.evaluate([sp.cos(x) ** 2, sp.cos(x) ** 2 + 1, sp.Integer(7)])
    assert torch.allclose(b, a + 1) and c.shape in ((), (3,)) and float(c.reshape(-1)[0]) == 7


def test_piecewise_relations_and_an_unknown_function_refused():
    import pytest

    s, ev = _env(x=[-1.0, 0.0, 2.0])
    x = s["x"]
    (pw,) = ev.evaluate([sp.Piecewise((x, x > 0), (0, True))])
    assert pw.tolist() == [0.0, 0.0, 2.0]
    with pytest.raises(NotImplementedError, match="Heaviside"):  # only the table's functions
        ev.evaluate([sp.Heaviside(x)])
