"""What to change where the target refused the inputs gradscope chose: a shape hint where torch
says shapes do not fit (given with --shape, or gradscope's default), else a values hint."""

from __future__ import annotations

from tests.command import run
from tests.paths import DATA

DAY = f"{DATA}/day5.py"


def test_shapes_given_that_do_not_fit_get_a_shape_hint(capsys):
    code, _, err = run(capsys, "check", f"{DAY}:matmul", "--shape", "a=3,4", "--shape",
                       "b=5,6")
    assert code == 3 and "cannot be multiplied" in err
    assert "the shapes given with --shape (a (3, 4), b (5, 6)) do not fit" in err
    assert "chosen by gradscope" not in err and "uniform(" not in err
    code, _, err = run(capsys, "check", f"{DAY}:through_a_layer", "--shape", "a=3,5")
    assert code == 3 and "the shapes given with --shape (a (3, 5)) do not fit" in err


def test_default_shapes_refused_say_they_were_gradscopes(capsys):
    code, _, err = run(capsys, "check", f"{DAY}:matmul", "--shape", "a=3,4")
    assert code == 3 and "the shapes of b were gradscope's default, not given" in err
    assert "--shape b=" in err


def test_values_refused_keep_the_values_hint(capsys):
    code, _, err = run(capsys, "check", f"{DAY}:positive_only")
    assert code == 3 and "the values of a were chosen by gradscope" in err
    assert "shape" not in err.split("hint:")[1]
