"""Probing the target's structure: elementwise inputs found in 2·log2(n) calls, and whether the
forward moves with an element at all (a step) or ignores it."""

from __future__ import annotations

import torch

from gradscope.engines.fd.engine import FiniteDifferences
from gradscope.engines.fd.policy import DEFAULT_EPS
from tests.engines.fd import python_fd_of as _python_fd


def test_probe_finds_elementwise_python_code_in_two_log_n_calls():
    x = torch.linspace(-2, 2, 5000, dtype=torch.float64)
    fd = _python_fd(lambda t: t * torch.sigmoid(t), x)
    # 5000 < 2**13: each bit group moved by its step, then the even and odd elements moved far
    assert fd.is_elementwise("x") and fd.probed["x"] == 2 * 13 + 2
    col = fd.estimate("x")
    assert col.mode == "elementwise" and col.forward_calls == 4
    s = torch.sigmoid(x)
    assert torch.allclose(col.partial, s + x * s * (1 - s), rtol=1e-9)


def test_probe_sees_a_single_cross_dependence_anywhere():
    x = torch.linspace(-2, 2, 5000, dtype=torch.float64)

    def one_pair(t):  # elementwise except that output 4321 also reads element 17
        out = t * t
        return out + torch.nn.functional.one_hot(torch.tensor(4321), 5000) * t[17]

    for fn in (one_pair, lambda t: torch.roll(t, 1), lambda t: torch.cumsum(t, 0)):
        fd = _python_fd(fn, x)
        assert not fd.is_elementwise("x") and "x" in fd.probed


def test_probe_follows_broadcasting_and_skips_small_inputs():
    x = torch.linspace(-1, 1, 2000, dtype=torch.float64).reshape(2000, 1)
    fd = _python_fd(lambda t: torch.sin(t) * torch.ones(2000, 3, dtype=torch.float64), x)
    assert fd.is_elementwise("x")
    small = _python_fd(torch.sin, torch.linspace(-1, 1, 8, dtype=torch.float64))
    assert not small.is_elementwise("x") and "x" not in small.probed  # dense is cheap there


def test_depends_tells_a_step_from_an_ignored_element():
    # round(x)·[1, 1, 0]: flat everywhere; the third element is ignored at every value
    def fn(values):
        x = values["x"]
        return torch.round(x) * torch.tensor([1.0, 1.0, 0.0], dtype=x.dtype), []

    fd = FiniteDifferences(fn, {"x": torch.tensor([0.2, 2.3, 0.4], dtype=torch.float64)},
                           eps=DEFAULT_EPS, elementwise=set())
    assert fd.depends("x", torch.arange(3)).tolist() == [True, True, False]
    # past the budget, elements are probed in groups: a group that moves counts for all
    assert fd.depends("x", torch.arange(3), budget=0).tolist() == [True, True, True]
    # an elementwise input is probed all at once, each output element answering for its own
    fd.elementwise.add("x")
    assert fd.depends("x", torch.arange(3), budget=0).tolist() == [True, True, False]
    assert fd.depends("x", torch.tensor([2, 0])).tolist() == [False, True]


def test_a_probe_that_saturated_points_fool_defers_to_autograds_jacobian():
    x = torch.linspace(-2, 2, 5000, dtype=torch.float64)
    asked = []

    def not_diagonal(name):  # (what autograd's Jacobian says: cross terms)
        asked.append(name)
        return False

    fd = _python_fd(lambda t: t * torch.sigmoid(t), x, diagonal=not_diagonal)
    assert not fd.is_elementwise("x") and asked == ["x"]
    assert _python_fd(lambda t: t * torch.sigmoid(t), x, diagonal=lambda n: True) \
        .is_elementwise("x")


def test_a_top_k_mask_is_not_taken_for_elementwise_where_a_far_move_reorders_it():
    # a small step reorders nothing, so each mask element moves with its own input only;
    # moved past every other element, half of them push the others out of the top k
    x = torch.linspace(-2, 2, 40, dtype=torch.float64)[
        torch.randperm(40, generator=torch.Generator().manual_seed(0))]

    def top_half(t):
        return (t >= t.sort(descending=True).values[19]).to(t.dtype) * t

    assert not _python_fd(top_half, x).is_elementwise("x")
    assert _python_fd(lambda t: t.clamp(-1, 1) ** 2, x).is_elementwise("x")


def test_a_solver_iterating_every_element_together_stays_elementwise():
    # its far-moved elements take it more Newton steps: the others move by their last digits
    def cube_root(x):
        y = x.detach().clone()
        for _ in range(50):
            step = (y**3 + y - x) / (3 * y**2 + 1)
            y = y - step
            if float(step.abs().max()) < 1e-13:
                break
        return y

    x = torch.linspace(-2, 2, 40, dtype=torch.float64)
    assert _python_fd(cube_root, x).is_elementwise("x")
