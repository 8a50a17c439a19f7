"""The expressions PyTorch users write every day (tests/data/everyday.txt): together they use
every op an expression can call, and each op family's lines are checked by its own test file
(tests/expr/ops/test_<family>.py), every line by exactly one."""

from __future__ import annotations

from gradscope.expr import ops
from gradscope.expr.ops import COMPARE, OPS
from tests.expr.ops import CASES, USED, everyday

FAMILY_MODULES = (ops.elementwise, ops.special, ops.activations, ops.reductions,
                  ops.structural, ops.shape, ops.linalg, ops.composite, ops.conv, ops.blas,
                  ops.spelled, ops.parts, ops.order, ops.indexing, ops.accumulate,
                  ops.variants, ops.resample, ops.layers, ops.losses, ops.matrix,
                  ops.masked, ops.conv_nd, ops.numerics,
                  ops.factor, ops.sampling)


def test_the_catalogue_uses_every_op_an_expression_can_call():
    used = set().union(*USED)
    callable_ops = {name for name, op in OPS.items() if op.expression}
    assert callable_ops - used == set()
    assert len(CASES) >= 150
    assert {op.kind for name, op in OPS.items() if name in used} >= {COMPARE, "structural"}


def test_every_line_is_checked_by_one_family():
    assigned = [case for module in FAMILY_MODULES for case in everyday(module)]
    assert sorted(c[0] for c in assigned) == sorted(c[0] for c in CASES if c)
