"""The expressions PyTorch users write every day (tests/data/everyday.txt), each checked the way
a user would: all three engines agree in float64 and float32, the symbolic column is there, and
the symbolic VJP matches an independent reference (torch.func.vjp of the same forward) at a
random upstream. Together the lines use every op an expression can call."""

from __future__ import annotations

import pytest
import torch

import gradscope
from gradscope.engines.symbolic import SymbolicEngine
from gradscope.expr import ir
from gradscope.expr.ops import COMPARE, OPS
from gradscope.expr.parse import parse
from gradscope.inputs.bind import bind
from gradscope.options import from_values
from gradscope.targets import resolve
from tests.paths import ROOT

LINES = [line for line in (ROOT / "tests/data/everyday.txt").read_text().splitlines()
         if line.strip() and not line.startswith("#")]


def _case(line: str) -> tuple[str, dict[str, dict[str, str]]]:
    expr, _, rest = line.partition(" ;; ")
    options: dict[str, dict[str, str]] = {}
    for part in rest.split():
        option, _, assignment = part.partition("=")
        name, _, value = assignment.partition(":")
        options.setdefault(option, {})[name] = value
    return expr.strip(), options


CASES = [_case(line) for line in LINES]


def test_the_catalogue_uses_every_op_an_expression_can_call():
    used = {n.op for expr, _ in CASES for n in parse(expr).walk() if isinstance(n, ir.Call)}
    callable_ops = {name for name, op in OPS.items() if op.expression}
    assert callable_ops - used == set()
    assert len(CASES) >= 150
    assert {op.kind for name, op in OPS.items() if name in used} >= {COMPARE, "structural"}


@pytest.mark.parametrize("expr, options", CASES, ids=[c[0][:50] for c in CASES])
def test_engines_agree_in_float64_and_float32(expr, options):
    for dtype in ("float64", "float32"):
        report = gradscope.check(expr, dtype=dtype, **options)
        assert report.passed, report.to_text()
        assert all(item.symbolic_skipped is None for item in report.inputs), \
            [item.symbolic_skipped for item in report.inputs]
        compared = sum(n for item in report.inputs for k, n in item.status_counts.items()
                       if k != "skipped")
        assert compared > 0


@pytest.mark.parametrize("expr, options", CASES, ids=[c[0][:50] for c in CASES])
def test_symbolic_vjp_matches_torch_func_vjp(expr, options):
    target = resolve(expr)
    bound = bind(from_values(options).validate(), target)
    names = target.names
    values = bound.exact
    engine = SymbolicEngine(target.expression, {**values, **target.constants},
                            constants=frozenset(target.constants))

    def forward(*xs: torch.Tensor) -> torch.Tensor:
        return target.forward(dict(zip(names, xs, strict=True)))

    out, pull = torch.func.vjp(forward, *[values[n] for n in names])
    v = torch.randn(out.shape, generator=torch.Generator().manual_seed(7), dtype=out.dtype)
    reference = pull(v)
    got = engine.vjp(v)
    for name, want in zip(names, reference, strict=True):
        # rtol: torch's hardsigmoid backward multiplies by a float32 1/6
        assert torch.allclose(got[name], want, rtol=1e-7, atol=1e-10), name
