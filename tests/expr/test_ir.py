"""The IR: spans into the source, walking, dependence."""

from gradscope.expr import ir
from gradscope.expr.parse import parse


def test_spans_walk_and_dependence():
    expr = parse("sum(round(x) * w)")
    calls = [n for n in expr.walk() if isinstance(n, ir.Call)]
    assert [c.op for c in calls] == ["sum", "mul", "round"]
    assert expr.text(calls[2]) == "round(x)" and expr.inputs == ("x", "w")
    assert ir.depends_on(calls[2], "x") and not ir.depends_on(calls[2], "w")
