"""Estimates: immutable, two kinds (one partial per output element, or Jacobian columns, all
or sampled), and the products the comparison needs from them."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from gradscope.engines.fd.result import ColumnEstimate, ElementwiseEstimate


def _t(*v):
    return torch.tensor(v, dtype=torch.float64)


def _elementwise() -> ElementwiseEstimate:
    # y = x * w with x (3,) broadcast over (2, 3): ∂y/∂x = w per output element
    partial = torch.tensor([[1.0, 2, 3], [4, 5, 6]], dtype=torch.float64)
    error = torch.full((2, 3), 1e-9, dtype=torch.float64)
    return ElementwiseEstimate("x", (3,), (2, 3), partial, error,
                               torch.tensor([False, True, False]))


def test_an_elementwise_estimate_sums_over_broadcast_copies():
    est = _elementwise()
    assert est.mode == "elementwise" and est.checked is None and est.sampled is None
    grad, err = est.vjp(torch.ones(2, 3, dtype=torch.float64), ones=True)
    assert grad.tolist() == [5.0, 7.0, 9.0] and torch.allclose(err, _t(2e-9, 2e-9, 2e-9))
    v = torch.tensor([[1.0, 0, 2], [0, 1, 0]], dtype=torch.float64)
    assert est.vjp(v)[0].tolist() == [1.0, 5.0, 6.0]
    jac, _ = est.jacobian()
    assert jac.shape == (6, 3) and jac[4].tolist() == [0.0, 5.0, 0.0]
    assert est.nonconstant(0.0).tolist() == [True, False, True]  # the kinked one never


def test_a_sampled_column_estimate_answers_its_sample_only():
    partial = torch.tensor([[2.0, 0.0]], dtype=torch.float64)  # columns of elements 1 and 3
    est = ColumnEstimate("x", (4,), (1,), partial, torch.zeros(1, 2, dtype=torch.float64),
                         torch.zeros(4, dtype=torch.bool), indices=torch.tensor([1, 3]))
    assert est.mode == "sampled" and est.checked.tolist() == [False, True, False, True]
    grad, _ = est.vjp(torch.ones(1, dtype=torch.float64))
    assert torch.isnan(grad[0]) and grad[1] == 2.0 and grad[3] == 0.0
    assert est.nonconstant(1e-9).tolist() == [False, True, False, False]
    assert not est.locally_constant(1e-9)
    jac, _ = est.jacobian()
    assert torch.isnan(jac[0, 0]) and jac[0, 1] == 2.0


def test_a_dense_column_estimate_is_its_jacobian_and_is_frozen():
    jac = torch.tensor([[1.0, 0.0], [0.0, 0.0]], dtype=torch.float64)
    est = ColumnEstimate("x", (2,), (2,), jac, torch.zeros(2, 2, dtype=torch.float64),
                         torch.zeros(2, dtype=torch.bool))
    assert est.mode == "dense" and est.jacobian()[0] is jac
    assert est.nonconstant(1e-9).tolist() == [True, False]
    with pytest.raises(dataclasses.FrozenInstanceError):
        est.partial = jac  # type: ignore[misc]


def test_the_kinks_an_op_explains_leave_out_those_the_differences_found():
    kink = torch.tensor([True, True, True, False])
    by_branch = {0: torch.tensor([True, False, False, False]),
                 -1: torch.tensor([False, True, False, False]),
                 2: torch.tensor([False, False, True, False])}
    est = ColumnEstimate("x", (4,), (1,), torch.zeros(1, 4, dtype=torch.float64),
                         torch.zeros(1, 4, dtype=torch.float64), kink, by_branch)
    assert est.kink_by_op.tolist() == [True, False, True, False]
