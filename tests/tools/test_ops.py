"""The op table as rows: every function and operator, once."""

from gradscope.expr.ops import FUNCTIONS, OPS
from gradscope.tools.ops import table


def test_one_row_per_op_with_its_spelling():
    rows = {r.name: r for r in table()}
    assert set(rows) == set(OPS)
    assert all(rows[n].spelling.startswith(f"{n}(") for n in FUNCTIONS)
    assert rows["round"].gradient == "vanishing" and rows["clamp"].gradient == "saturation"
    assert rows["sum"].arity == "1–2" and rows["where"].arity == "3"
