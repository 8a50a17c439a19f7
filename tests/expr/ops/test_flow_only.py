"""Rows that only gradient-flow analysis reads: not callable from expressions, but their backward
nodes are known, and they saturate."""

from __future__ import annotations

import torch

from gradscope.expr.ops import BY_GRAD_FN, FUNCTIONS, SATURATES
from gradscope.expr.ops.flow_only import ROWS


def test_flow_only_rows_are_known_by_their_backward_and_never_callable():
    for op in ROWS:
        assert not op.expression and op.flow == SATURATES and op.name not in FUNCTIONS
        for grad_fn in op.grad_fns:
            assert BY_GRAD_FN[grad_fn] is op
    x = torch.randn(1, 1, 4, 4, 4, requires_grad=True)
    out = ROWS[0].torch(x, 2)
    assert type(out.grad_fn).__name__.startswith(ROWS[0].grad_fns[0])
