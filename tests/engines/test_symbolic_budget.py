"""The symbolic engine's budget stops sympy inside one long call, not only between calls."""

from __future__ import annotations

import time

import pytest
import sympy as sp
import torch

from gradscope.engines import symbolic
from gradscope.expr.parse import parse


def test_one_long_derivative_is_stopped_by_the_budget(monkeypatch):
    finished = []

    def endless(*args, **kwargs):  # pure Python work, as sympy's is, for up to 30 s
        stop = time.process_time() + 30
        while time.process_time() < stop:
            pass
        finished.append(True)
        return sp.Integer(0)

    monkeypatch.setattr(symbolic.sp, "diff", endless)
    values = {"x": torch.linspace(1, 2, 5, dtype=torch.float64)}
    with pytest.raises(symbolic.BudgetExceeded):
        symbolic.SymbolicEngine(parse("sin(x)"), values, budget_s=0.3)
    assert not finished  # stopped inside the call
