"""Convolutions and pooling: every row an expression can call appears in an everyday line, and the
lines written for this family check out — the three engines agree in float64 and float32, and
the symbolic VJP matches torch.func.vjp."""

from __future__ import annotations

import pytest

from gradscope.expr.ops import conv
from tests.expr.ops import engines_agree, everyday, ids, symbolic_matches_torch_func, unexercised

CASES = everyday(conv)


def test_every_row_is_exercised():
    assert CASES and unexercised(conv) == set()


@pytest.mark.parametrize("expr, options", CASES, ids=ids(CASES))
def test_engines_agree_in_float64_and_float32(expr, options):
    engines_agree(expr, options)


@pytest.mark.parametrize("expr, options", CASES, ids=ids(CASES))
def test_symbolic_vjp_matches_torch_func_vjp(expr, options):
    symbolic_matches_torch_func(expr, options)
