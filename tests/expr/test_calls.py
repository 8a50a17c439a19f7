"""How an expression calls an op: torch's spellings, arguments bound the way Python binds them
to torch's parameter names, static arguments read from literals and checked."""

from __future__ import annotations

import pytest

from gradscope.errors import UsageError
from gradscope.expr.calls import dotted, function_name
from gradscope.expr.parse import parse


def test_spellings_name_the_same_row():
    ops = {parse(text).root.op for text in ("F.sigmoid(x)", "torch.nn.functional.sigmoid(x)",
                                            "torch.sigmoid(x)", "sigmoid(x)", "x.sigmoid()")}
    assert ops == {"sigmoid"}
    assert function_name("torch.nn.functional.gelu") == "gelu"
    import ast

    assert dotted(ast.parse("torch.nn.functional.gelu", mode="eval").body) == \
        "torch.nn.functional.gelu"


def test_arguments_bind_by_position_and_keyword_and_statics_are_read():
    a, b = parse("x.sum(1, keepdim=True)").root, parse("sum(x, dim=1, keepdim=True)").root
    assert a.op == b.op == "sum" and dict(a.params) == dict(b.params)
    assert dict(a.params)["keepdim"] is True
    assert dict(parse("x.sum(axis=0)").root.params)["dim"] == 0  # numpy's spelling too


@pytest.mark.parametrize("text, fragment", [
    ("x.sum(keepdim=1.5)", "keepdim"),
    ("F.gelu(x, approximate='fast')", "approximate"),
    ("x.sum(1, 2, 3, 4)", "sum"),
    ("F.gelu()", "needs `input`"),
    ("x.sum(dim=y)", "dim"),
])
def test_wrong_arguments_are_refused_with_the_call_named(text, fragment):
    with pytest.raises(UsageError, match=fragment):
        parse(text)
