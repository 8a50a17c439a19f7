"""Columns that share evaluations by a claimed sparsity pattern (autograd's): the same
estimates as column by column at a fraction of the calls, and a wrong claim — the code under
test is what makes it — never hides a wrong gradient or misplaces one."""

from __future__ import annotations

import torch

import gradscope
from gradscope.engines.fd import FiniteDifferences
from gradscope.engines.fd.grouped import MAX_GROUP, colouring
from gradscope.engines.fd.policy import DEFAULT_EPS
from tests.data import sparse_jacobians as sj


def _x(rows: int = 30, cols: int = 8) -> torch.Tensor:
    return torch.randn(rows, cols, generator=torch.Generator().manual_seed(3),
                       dtype=torch.float64)


def _jacobian(fn, x: torch.Tensor) -> torch.Tensor:
    jac = torch.autograd.functional.jacobian(fn, x)
    return jac.reshape(-1, x.numel())


def _fd(fn, x: torch.Tensor, claimed: torch.Tensor | None) -> FiniteDifferences:
    def traced(values):
        return fn(values["x"]), []

    return FiniteDifferences(traced, {"x": x}, eps=DEFAULT_EPS, elementwise=set(),
                             claimed=None if claimed is None else (lambda name: claimed))


def _true(x: torch.Tensor) -> torch.Tensor:
    """What Shifted/Halves compute, by torch's own ops."""
    return 2 * x[:, :-1]


def _separate(pattern: torch.Tensor, groups: torch.Tensor) -> bool:
    return all(int(pattern[:, groups == g].sum(1).max()) <= 1 for g in groups.unique())


def test_colouring_keeps_the_columns_of_a_row_apart():
    block = torch.block_diag(*[torch.ones(3, 5, dtype=torch.bool)] * 8)  # (24, 40)
    groups = colouring(block)
    assert groups is not None and int(groups.max()) + 1 == 5 and _separate(block, groups)
    sparse = torch.rand(50, 400, generator=torch.Generator().manual_seed(1)) < 0.02
    groups = colouring(sparse)
    assert groups is not None and _separate(sparse, groups)
    assert colouring(torch.ones(4, 40, dtype=torch.bool)) is None  # no two columns share
    empty = colouring(torch.zeros(2, 1000, dtype=torch.bool))
    assert empty is not None and int(torch.bincount(empty).max()) <= MAX_GROUP


def test_grouped_columns_equal_column_by_column_at_a_fraction_of_the_calls():
    x = _x()
    claimed = _jacobian(sj.row_softmax, x) != 0
    grouped = _fd(sj.row_softmax, x, claimed).estimate("x")
    alone = _fd(sj.row_softmax, x, None).estimate("x")
    assert grouped.forward_calls == 2 * 8 and alone.forward_calls == 2 * x.numel()
    assert "8 groups of columns" in grouped.note
    assert torch.allclose(grouped.partial, alone.partial, atol=1e-7)
    assert torch.allclose(grouped.partial, _jacobian(sj.row_softmax, x), atol=1e-7)


def _judged(fn, x: torch.Tensor) -> tuple[FiniteDifferences, torch.Tensor]:
    """The estimate as a check leaves it: columns that disagree with autograd refined."""
    autograd = _jacobian(fn, x)
    fd = _fd(fn, x, autograd != 0)
    est = fd.estimate("x")
    doubted = ((est.partial - autograd).abs() > 1e-6).any(0).reshape(x.shape)
    assert bool(doubted.any())  # the weights make a misplaced entry disagree
    est, _ = fd.refine(est, doubted)
    return fd, est.partial


def test_an_output_no_claimed_column_moves_takes_its_group_apart_at_once():
    x = _x()
    est = _fd(sj.Dropped.apply, x, _jacobian(sj.Dropped.apply, x) != 0).estimate("x")
    assert torch.allclose(est.partial, 3 * torch.eye(x.numel(), dtype=torch.float64))
    assert bool((est.groups < 0).all())


def test_a_claim_that_misses_dependencies_is_refined_into_the_truth():
    x = _x()
    _, partial = _judged(sj.Blind.apply, x)  # misses x[:, 0] in every other output
    assert torch.allclose(partial, _jacobian(lambda z: z * z[:, :1], x), atol=1e-6)


def test_a_claim_one_column_off_is_refined_into_the_truth():
    x = _x()
    _, partial = _judged(sj.Shifted.apply, x)
    assert torch.allclose(partial, _jacobian(_true, x), atol=1e-6)


def test_a_constant_factor_refines_as_groups_when_two_weightings_agree():
    x = _x()
    fd = _fd(sj.RowScaled.apply, x, _jacobian(sj.RowScaled.apply, x) != 0)
    first = fd.estimate("x")
    est, count = fd.refine(first, torch.ones_like(x, dtype=torch.bool))
    assert count == x.numel() and bool((est.points == 4).all())
    assert est.forward_calls - first.forward_calls == 8 * 8  # two 4-point passes per group
    assert torch.allclose(est.partial, _jacobian(sj.row_softmax, x), atol=1e-8)


def test_checks_place_wrong_gradients_whatever_the_claim():
    x = _x(6, 8)
    shifted = gradscope.check(sj.Shifted, x=x)
    assert not shifted.passed
    # (the table's upstream is ones: its VJP is off in the first and last columns only)
    wrong = [[s.value == "mismatch" for s in row] for row in shifted.inputs[0].element_status]
    assert wrong == [[True] + [False] * 6 + [True]] * 6
    blind = gradscope.check(sj.Blind, x=x)
    column0 = [row[0].value for row in blind.inputs[0].element_status]
    assert not blind.passed and column0 == ["mismatch"] * 6
    assert any("then every column was differenced on its own" in n for n in blind.notes)
    assert gradscope.check(sj.Halves, x=x).passed
    shared = gradscope.check(sj.row_softmax, x=x).notes
    assert any("48 columns shared 8 groups of evaluations" in n for n in shared)


def test_the_drop_in_fails_a_moved_gradient_and_names_a_factor_torch_passes():
    x = _x(6, 8).requires_grad_()
    assert not gradscope.gradcheck(sj.Shifted.apply, (x,), raise_exception=False)
    assert gradscope.gradcheck(sj.Halves.apply, (x,))
    assert not gradscope.gradcheck(sj.RowScaled.apply, (x,), raise_exception=False,
                                   strict=True)
