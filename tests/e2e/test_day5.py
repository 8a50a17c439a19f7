"""A new user's day, round 5: hints true for the case they are given in (a shape refused, a
value refused), one name per input everywhere in a report, and why a column is empty."""

from __future__ import annotations

import pytest
import torch

import gradscope
from tests.command import run
from tests.paths import DATA

DAY = f"{DATA}/day5.py"


def test_the_drop_in_names_a_functions_inputs_as_its_culprit_line_does():
    from tests.data.day5 import DoubledSecond

    torch.manual_seed(0)
    x, y = (torch.randn(3, dtype=torch.float64, requires_grad=True) for _ in range(2))
    with pytest.raises(gradscope.GradcheckError) as info:
        gradscope.gradcheck(DoubledSecond.apply, (x, y))
    text = str(info.value)
    assert "for its argument y" in text and "input y " in text and "input1" not in text


def test_why_the_symbolic_column_is_empty_is_said_once(capsys):
    code, out, _ = run(capsys, "check", f"{DAY}:DoubledSecond")
    assert code == 1
    assert out.count("symbolic —: Python code has no symbolic form") == 1
    code, out, _ = run(capsys, "check", "a*b")
    assert code == 0 and "symbolic —" not in out
