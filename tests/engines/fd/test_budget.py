"""Which inputs are sampled is a function of sizes and flags (and one timed evaluation)."""

from __future__ import annotations

import torch

from gradscope.engines.fd import FiniteDifferences
from gradscope.engines.fd.budget import sample_size, sampled_note
from gradscope.targets import resolve
from gradscope.verdict.tolerance import DEFAULT_EPS


def _fd(expr: str, n: int) -> FiniteDifferences:
    target = resolve(expr)
    values = {"x": torch.linspace(-1, 1, n, dtype=torch.float64)}
    return FiniteDifferences(target.traced, values, eps=DEFAULT_EPS,
                             elementwise=target.elementwise_inputs,
                             around=target.traced_around)


def test_elementwise_and_small_dense_inputs_get_every_element():
    assert sample_size(_fd("sin(x)", 50_000), "x", max_fd=10, sample=5) is None
    assert sample_size(_fd("sum(sin(x))", 100), "x", max_fd=1000, sample=5) is None


def test_dense_inputs_past_max_fd_are_sampled():
    assert sample_size(_fd("sum(sin(x))", 100), "x", max_fd=50, sample=7) == 7
    assert sample_size(_fd("sum(sin(x))", 100), "x", max_fd=50, sample=500) == 100


def test_the_note_says_what_was_covered_and_why():
    note = sampled_note("x", 7, 100, 7, 50, 0.001, "the symbolic engine covers every element, ",
                        3)
    assert note.startswith("finite differences estimated 7 of 100 elements of x")
    assert "--max-fd 50" in note and "3 random projections" in note and "capped" not in note
    assert "capped at 2 columns" in sampled_note("x", 2, 100, 7, 50, 0.5, "", 3)
