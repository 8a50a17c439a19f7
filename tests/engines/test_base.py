"""The three engines answer the same questions through one interface, and agree."""

from __future__ import annotations

import pytest
import torch

from gradscope.engines.autograd import AutogradEngine
from gradscope.engines.base import Engine
from gradscope.engines.fd import FiniteDifferences
from gradscope.engines.fd.policy import DEFAULT_EPS
from gradscope.engines.symbolic import SymbolicEngine
from gradscope.targets import resolve

EXPR = "sin(x) * y + sum(exp(x) * y**2)"


def _engines():
    target = resolve(EXPR)
    gen = torch.Generator().manual_seed(1)
    values = {n: torch.randn(4, generator=gen, dtype=torch.float64) for n in target.names}
    autograd = AutogradEngine(target.forward, values)
    symbolic = SymbolicEngine(target.expression, values)
    fd = FiniteDifferences(target.traced, values, eps=DEFAULT_EPS,
                           elementwise=target.elementwise_inputs)
    return values, [autograd, symbolic, fd]


def test_every_engine_is_an_engine():
    _, engines = _engines()
    assert all(isinstance(e, Engine) for e in engines)


@pytest.mark.parametrize("question", ["vjp", "jvp"])
def test_engines_agree_through_the_protocol(question):
    values, (autograd, symbolic, fd) = _engines()
    if question == "vjp":
        v = torch.linspace(-1, 1, 4, dtype=torch.float64)
        answers = [e.vjp(v) for e in (autograd, symbolic, fd)]
        for name in values:
            for other in answers[1:]:
                assert torch.allclose(answers[0][name], other[name], rtol=1e-6, atol=1e-8)
    else:
        t = {n: torch.full((4,), 0.5, dtype=torch.float64) for n in values}
        a, s, f = (e.jvp(t) for e in (autograd, symbolic, fd))
        assert torch.allclose(a, s, rtol=1e-9) and torch.allclose(a, f, rtol=1e-6, atol=1e-8)
