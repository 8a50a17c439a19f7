"""The lookups everything else reads are derived from the rows, never written twice."""

from gradscope.expr.ops import (
    BINARY,
    BY_GRAD_FN,
    COMPARISONS,
    FUNCTIONS,
    JUMP,
    KNOWN,
    OPS,
    POLE,
    SYMPY_TORCH,
    UNARY,
)


def test_operators_come_from_the_rows_symbols():
    assert BINARY == {"Add": "add", "Sub": "sub", "Mult": "mul", "Div": "div", "Pow": "pow",
                      "MatMult": "matmul"}
    assert UNARY == {"USub": "neg", "UAdd": "pos"}
    assert COMPARISONS == {"Lt": "lt", "LtE": "le", "Gt": "gt", "GtE": "ge"}
    # operators are callable by torch's names too (torch.add, x.mul), comparisons are not
    assert FUNCTIONS["add"] is OPS["add"] and FUNCTIONS["true_divide"] is OPS["div"]
    assert "pow" in FUNCTIONS and "lt" not in FUNCTIONS


def test_every_kinky_row_says_what_its_branch_marks():
    for op in OPS.values():
        assert (op.branch is None) == (op.kink is None), op.name
    assert OPS["round"].kink == JUMP and OPS["div"].kink == POLE and OPS["tan"].kink == POLE


def test_rows_answer_what_other_modules_used_to_hard_code():
    assert OPS["pow"].kinky_args((None, 2.0)) == () and OPS["pow"].kinky_args((None, 0.5)) == (
        0, 1)
    assert OPS["div"].kinky_args((None, None)) == (1,) and OPS["abs"].kinky_args((None,)) == (0,)
    assert OPS["mul"].fold(2.0, 3.0) == 6.0 and OPS["sin"].fold is None
    assert OPS["max"].extreme == 1 and OPS["min"].extreme == -1 and OPS["sum"].extreme == 0
    assert OPS["sum"].incremental is not None and OPS["prod"].incremental is None
    assert OPS["where"].condition_arg == 0 and OPS["pow"].exponent_arg == 1


def test_gradient_flow_knows_torch_backward_nodes_by_row():
    assert BY_GRAD_FN["RoundBackward"].name == "round" and OPS["round"].vanishing
    assert BY_GRAD_FN["SgnBackward"].name == "sign"
    assert BY_GRAD_FN["ClampMinBackward"].flow == "saturation"
    assert not KNOWN["fractional_max_pool3d"].expression and "fractional_max_pool3d" not in OPS
    assert BY_GRAD_FN["MaxPool3DWithIndicesBackward"] is OPS["max_pool3d"]
    assert BY_GRAD_FN["HardtanhBackward"] is OPS["hardtanh"] and OPS["hardtanh"].expression
    assert OPS["round"].hint == "x + (x.round() - x).detach()"


def test_sympy_evaluation_map_comes_from_the_rows():
    import sympy as sp
    import torch

    assert SYMPY_TORCH[sp.sin] is torch.sin and SYMPY_TORCH[sp.atan2] is torch.atan2
    assert SYMPY_TORCH[sp.erfinv] is torch.erfinv and SYMPY_TORCH[sp.acosh] is torch.acosh
    # every sympy class a row names (not gradscope's own functions) is mapped, and no other
    named = {op.sympy for op in OPS.values() if isinstance(op.sympy, type)
             and issubclass(op.sympy, sp.Function) and not hasattr(op.sympy, "torch_impl")}
    assert set(SYMPY_TORCH) == named
