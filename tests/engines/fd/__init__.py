"""Helpers of the finite-difference engine's tests: the engine on an expression, or on a
Python function of one input (probed for structure, as user code is)."""

from __future__ import annotations

import torch

from gradscope.engines.fd import FiniteDifferences
from gradscope.engines.fd.policy import DEFAULT_EPS
from gradscope.engines.fd.stencil import TWO_POINT_FROM
from gradscope.targets import resolve


def fd_of(expr, two_point_from=TWO_POINT_FROM, **values):
    target = resolve(expr)
    vals = {k: torch.tensor(v, dtype=torch.float64) for k, v in values.items()}
    return FiniteDifferences(target.traced, vals, eps=DEFAULT_EPS,
                             elementwise=target.elementwise_inputs,
                             two_point_from=two_point_from), target


def python_fd_of(fn, x, **kw):
    def traced(values):
        return fn(values["x"]), []

    return FiniteDifferences(traced, {"x": x}, eps=DEFAULT_EPS, elementwise=set(), probe=True,
                             **kw)
