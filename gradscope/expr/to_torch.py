"""IR → torch: evaluate an expression on tensors, optionally reporting every node to a visitor.

The visitor sees each op application with its argument values and result; the finite-difference
engine uses it to read branch ids (kinks and jumps), the diagnostics to read intermediates.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch

from gradscope.errors import EvaluationError, UsageError
from gradscope.expr import ir
from gradscope.expr.ops import OPS

Visitor = Callable[[ir.Call, list, torch.Tensor], None]


class MetaUnknown(NotImplementedError):
    """On meta tensors, an op's output size depends on the data and its row has no bound."""


def _data_dependent(exc: Exception) -> bool:
    return isinstance(exc, NotImplementedError) or "meta" in str(exc)


def evaluate(expr: ir.Expression, values: Mapping[str, torch.Tensor], *,
             visit: Visitor | None = None,
             reuse: Mapping[int, torch.Tensor] | None = None) -> torch.Tensor:
    """Evaluate `expr` on `values` (all of one dtype and device); constants follow that dtype.
    `reuse` maps node ids to values already known: those subtrees are neither evaluated nor
    visited."""
    first = next(iter(values.values()))
    consts: dict[float, torch.Tensor] = {}

    def constant(value: float) -> torch.Tensor:
        if value not in consts:
            consts[value] = torch.tensor(value, dtype=first.dtype, device=first.device)
        return consts[value]

    # `run` gets itself as an argument instead of calling itself through its closure: a
    # self-referencing closure is a reference cycle, which kept `values` (perturbed copies of
    # whole inputs, 160 MB each at 20M elements) alive until Python's collector ran.
    def run(node: ir.Node, again: Callable[..., torch.Tensor]) -> torch.Tensor:
        if reuse is not None and id(node) in reuse:
            return reuse[id(node)]
        if isinstance(node, ir.Var):
            return values[node.name]
        if isinstance(node, ir.Num | ir.Const):
            return constant(node.value)
        assert isinstance(node, ir.Call)
        op = OPS[node.op]
        args = [float(a.value) if i in op.scalar_args and isinstance(a, ir.Num | ir.Const)
                else again(a, again) for i, a in enumerate(node.args)]
        kwargs = node.kwargs
        try:
            out = op.apply(args, node.names, kwargs)
        except (RuntimeError, IndexError, ValueError, TypeError, ArithmeticError) as exc:
            if first.device.type == "meta" and _data_dependent(exc):
                # no meta kernel (masked_select: its size depends on the data): the row's
                # bound, the largest output it can make, else the size is unknown
                if op.bound is None:
                    raise MetaUnknown(expr.text(node)) from None
                out = op.apply(args, node.names, kwargs, bound=True)
                if visit is not None:
                    visit(node, args, out)
                return out
            shapes = ", ".join(str(tuple(a.shape)) if isinstance(a, torch.Tensor) else "()"
                               for a in args)
            text = str(exc).strip()
            first_line = text.splitlines()[0] if text else type(exc).__name__
            wrong = op.floats_for_integers(op.slots(args, node.names))
            if wrong and not isinstance(exc, UsageError):  # class indices given as floats
                first_line += f"; {op.integers_hint(wrong[0])}"
            raise EvaluationError(expr.text(node), shapes, first_line) from None
        if visit is not None:
            visit(node, args, out)
        return out

    return run(expr.root, run)
