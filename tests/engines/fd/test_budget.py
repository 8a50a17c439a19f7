"""Which inputs are sampled is a function of sizes and flags (and one timed evaluation)."""

from __future__ import annotations

import torch

from gradscope.engines.fd import FiniteDifferences
from gradscope.engines.fd.budget import sample_size, sampled_note
from gradscope.engines.fd.policy import DEFAULT_EPS
from gradscope.targets import resolve


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


def _model_fd(width: int, batch: int = 64) -> FiniteDifferences:
    """A two-layer model over `width` features, its first weight the input `w`."""
    torch.manual_seed(0)
    w = torch.randn(width, width, dtype=torch.float64) / width
    x = torch.randn(batch, width, dtype=torch.float64)

    def forward(values):
        return torch.tanh(torch.tanh(x @ values["w"]) @ values["w"].T).pow(2).mean()

    return FiniteDifferences(lambda v: (forward(v), []), {"w": w}, eps=DEFAULT_EPS,
                             elementwise=set())


def test_a_models_weight_is_not_sampled_for_what_its_copies_move():
    # 25,600 elements: 4 × 25,600² element moves would pass the copy budget of an expression's
    # column (2e9), but a model's column costs its activations, which the flop budget counts
    fd = _model_fd(160)
    assert fd.point.activations() > 160 * 160
    assert sample_size(fd, "w", max_fd=100_000, sample=1000) is None
    assert sample_size(fd, "w", max_fd=20_000, sample=1000) == 1000


def test_the_same_size_without_activations_is_sampled_by_its_copies():
    fd = _fd("sum((x - mean(x))**2)", 40_000)  # each column moves whole copies
    assert sample_size(fd, "x", max_fd=100_000, sample=1000) == 1000


def test_elementwise_work_the_flop_counter_misses_keeps_the_copy_cap():
    # tanh and pow keep two input-sized tensors (activations above the input's size) but
    # count no flops: the columns' real cost is elementwise, so the copy cap samples them
    fd = _fd("sum(tanh(x - mean(x))**2)", 40_000)
    assert fd.point.activations() > 40_000 and fd.flops() == 0
    assert sample_size(fd, "x", max_fd=100_000, sample=1000) == 1000


def test_an_intermediate_wider_than_inputs_and_output_bounds_the_columns(monkeypatch):
    # outer(x, y) computes 10x the elements of both inputs together: the same work bound
    # affords all columns of sin(x)·y's sum and only some of sin(outer(x, y))'s
    import gradscope
    from gradscope.engines.fd import budget

    monkeypatch.setattr(budget, "MAX_DENSE_WORK", 4e5)
    cheap = gradscope.check("sum(sin(x) * y)", x="randn(200)", y="randn(200)")
    wide = gradscope.check("sum(sin(outer(x, y)))", x="randn(200)", y="randn(200)")
    assert {i.finite_difference_mode for i in cheap.inputs} != {"sampled"}
    assert {i.finite_difference_mode for i in wide.inputs} == {"sampled"}
    assert wide.passed and any("capped at" in n for n in wide.notes)


def test_the_work_bound_is_shared_by_all_inputs(monkeypatch):
    from gradscope.engines.fd import budget

    class FD:  # two inputs of 100 elements whose columns each move 1,000 elements
        def __init__(self):
            self.values = {"a": torch.zeros(100), "b": torch.zeros(100)}
            self.out = torch.zeros(())
            self.point = type("P", (), {"elements": staticmethod(lambda: 1000)})()

        def is_elementwise(self, name):
            return False

        def column_width(self, name):
            return None

    monkeypatch.setattr(budget, "MAX_DENSE_WORK", 4 * 1000 * 150)
    # 150 columns in all, not 150 each: the first (by need, then name) gets its fair half
    assert budget._work_share(FD(), "a") == 75 and budget._work_share(FD(), "b") == 75


def test_the_stored_entries_are_shared_by_all_inputs(monkeypatch):
    from gradscope.engines.fd import budget

    class FD:  # an output of 1,000 elements; inputs of 10, 100 and 100 elements
        def __init__(self):
            self.values = {"a": torch.zeros(100), "b": torch.zeros(100), "c": torch.zeros(10)}
            self.out = torch.zeros(1000)

        def is_elementwise(self, name):
            return False

    monkeypatch.setattr(budget, "MAX_STORED_ENTRIES", 110_000)
    # c needs 10,000 and gets them; a and b share the 100,000 left
    assert [budget._stored_share(FD(), n) for n in "abc"] == [50_000, 50_000, 10_000]


def test_a_sort_costs_its_log_per_element_in_the_work_count():
    plain, sorted_ = _fd("x * 2", 4096).point.elements(), _fd("sort(x).values", 4096)
    assert sorted_.point.elements() >= 12 * 4096 > plain


def test_every_element_is_asked_for_whatever_it_costs_where_memory_holds_it(monkeypatch):
    from gradscope.engines.fd import budget

    fd = _fd("sum(sin(x))", 100)
    assert sample_size(fd, "x", max_fd=50, sample=7, every=True) is None
    monkeypatch.setattr(budget, "MAX_DENSE_WORK", 10.0)
    monkeypatch.setattr(budget, "MAX_DENSE_FLOPS", 1.0)
    assert sample_size(fd, "x", max_fd=1000, sample=7) <= 7  # (the budgets cap it)
    assert sample_size(fd, "x", max_fd=1000, sample=7, every=True) is None
    monkeypatch.setattr(budget, "MAX_STORED_ENTRIES", 50)  # memory does not hold its columns
    assert sample_size(fd, "x", max_fd=1000, sample=7, every=True) == 50
