"""What a torch function computes per element, for the finite-difference budget."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from gradscope.expr.ops import costs


def test_sorting_costs_log_n_and_factorisations_n():
    x = torch.zeros(1024)
    assert costs.factor(torch.sort, (x,)) == 10 and costs.factor(torch.Tensor.sort, (x,)) == 10
    assert costs.factor(torch.linalg.eigh, (torch.zeros(64, 64),)) == 64
    assert costs.factor(torch.sin, (x,)) == 1.0


def test_a_grouped_convolution_costs_its_groups():
    x = torch.zeros(1, 1000, 1)
    assert costs.factor(F.conv1d, (x, torch.zeros(1000, 1, 1)), {"groups": 1000}) == \
        1 + 1000 * 1000 / 1000
    assert costs.factor(F.conv1d, (x, torch.zeros(1, 1000, 1))) == 1.0
    assert math.isclose(costs.factor(torch.cdist, (torch.zeros(5, 3), torch.zeros(4, 3))), 3)
