"""The everyday expressions (tests/data/everyday.txt) by op family: each line goes to the family
of the rarest op it uses (the one it was written for), and each family's test file checks its
lines the way a user would — all three engines agree in float64 and float32 with the symbolic
column there, and the symbolic VJP matches torch.func.vjp of the same forward."""

from __future__ import annotations

from collections import Counter
from types import ModuleType
from typing import Any

import torch

import gradscope
from gradscope.engines.symbolic import SymbolicEngine
from gradscope.expr import ir
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
USED = [{n.op for n in parse(expr).walk() if isinstance(n, ir.Call)} for expr, _ in CASES]
_COUNTS = Counter(op for ops in USED for op in ops)


def _rarest(ops: set[str]) -> str:
    return min(sorted(ops), key=lambda op: _COUNTS[op])


def everyday(module: ModuleType) -> list[tuple[str, dict[str, Any]]]:
    """The everyday lines written for an op of this family module."""
    names = {op.name for op in module.ROWS}
    return [case for case, ops in zip(CASES, USED, strict=True) if ops and _rarest(ops) in names]


def unexercised(module: ModuleType) -> set[str]:
    """The family's rows an expression can call that no everyday line uses."""
    used = set().union(*USED)
    return {op.name for op in module.ROWS if op.expression} - used


def ids(cases: list[tuple[str, Any]]) -> list[str]:
    return [expr[:50] for expr, _ in cases]


def engines_agree(expr: str, options: dict[str, Any]) -> None:
    for dtype in ("float64", "float32"):
        report = gradscope.check(expr, dtype=dtype, **options)
        assert report.passed, report.to_text()
        assert all(item.symbolic_skipped is None for item in report.inputs), \
            [item.symbolic_skipped for item in report.inputs]
        assert sum(n for item in report.inputs for n in item.status_counts.values()) > 0


def symbolic_matches_torch_func(expr: str, options: dict[str, Any]) -> None:
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
    got = engine.vjp(v)
    for name, want in zip(names, pull(v), strict=True):
        # rtol: torch's hardsigmoid backward multiplies by a float32 1/6
        assert torch.allclose(got[name], want, rtol=1e-7, atol=1e-10), name


def family_tests(module: ModuleType) -> tuple[Any, Any, Any]:
    """The three tests of an op family's test file, for `module`'s rows and lines."""
    import pytest

    cases = everyday(module)

    def test_every_row_is_exercised() -> None:
        assert cases and unexercised(module) == set()

    @pytest.mark.parametrize("expr, options", cases, ids=ids(cases))
    def test_engines_agree_in_float64_and_float32(expr: str, options: dict[str, Any]) -> None:
        engines_agree(expr, options)

    @pytest.mark.parametrize("expr, options", cases, ids=ids(cases))
    def test_symbolic_vjp_matches_torch_func_vjp(expr: str, options: dict[str, Any]) -> None:
        symbolic_matches_torch_func(expr, options)

    return (test_every_row_is_exercised, test_engines_agree_in_float64_and_float32,
            test_symbolic_vjp_matches_torch_func_vjp)
