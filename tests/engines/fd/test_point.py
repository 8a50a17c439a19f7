"""The base evaluation: the output read in the engine's dtype with the round-off of the precision
it was computed in, and the cost of one evaluation counted, never timed."""

from __future__ import annotations

import torch

from gradscope.engines.fd.engine import FiniteDifferences
from gradscope.engines.fd.policy import DEFAULT_EPS


def test_cost_is_counted_not_timed():
    import time

    def traced(values):
        time.sleep(0.01)  # a slow machine changes nothing below
        return (values["x"] @ values["x"].T).sum().reshape(1), []

    fd = FiniteDifferences(traced, {"x": torch.ones(4, 5, dtype=torch.float64)},
                           eps=DEFAULT_EPS, elementwise=set())
    assert fd.flops() == 2 * 4 * 5 * 4 and fd.flops() == fd.flops()
    assert not hasattr(fd, "eval_seconds")


def test_a_lower_precision_output_is_read_in_float64_with_its_round_off():
    def fn(values):
        return torch.tanh(values["x"]).float(), []

    x = torch.linspace(-1, 1, 5, dtype=torch.float64)
    fd = FiniteDifferences(fn, {"x": x}, eps=5e-3, elementwise=set(),
                           round_off=torch.float32)
    est = fd.estimate("x")
    assert fd.out.dtype == torch.float64 and fd.point.machine_eps == torch.finfo(torch.float32).eps
    grad, err = est.vjp(torch.ones(5, dtype=torch.float64))
    exact = 1 - torch.tanh(x) ** 2
    assert bool(((grad - exact).abs() <= 3 * err + 1e-5).all())


def test_elements_count_every_intermediate_an_evaluation_computes():
    def traced(values):
        return torch.sin(torch.outer(values["x"], values["y"])).sum(), []

    fd = FiniteDifferences(traced, {"x": torch.ones(30, dtype=torch.float64),
                                    "y": torch.ones(40, dtype=torch.float64)},
                           eps=DEFAULT_EPS, elementwise=set())
    # outer, sin, the sum (what it reads: 1,200), its detached read
    assert fd.point.elements() == 1200 + 1200 + 1200 + 1


def test_elements_count_sorting_and_factorisations_by_what_they_compute():
    def traced(values):
        return torch.linalg.eigvalsh(values["a"]).sum() + torch.sort(values["x"]).values.sum(), []

    a = torch.eye(64, dtype=torch.float64)
    fd = FiniteDifferences(traced, {"a": a, "x": torch.ones(1024, dtype=torch.float64)},
                           eps=DEFAULT_EPS, elementwise=set())
    # eigvalsh reads 64² elements, 64 operations each; sort 1024, log2(1024) = 10 each
    assert fd.point.elements() >= 64 ** 3 + 1024 * 10


def test_noise_is_what_cancelling_terms_round_to_and_never_a_jump():
    from gradscope.engines.fd.point import Point

    def cancelling(values):  # a symmetric y: the true value is 0, each term is up to 1
        return torch.sin(torch.outer(values["x"], values["y"])).sum().reshape(1), []

    x = torch.linspace(-3, 3, 301, dtype=torch.float64)
    y = torch.cat([x, -x])
    point = Point(cancelling, {"x": x, "y": y}, eps=DEFAULT_EPS)
    eps = torch.finfo(torch.float64).eps
    assert float(point.noise()) > 10 * eps * max(float(point.out.abs()), eps)
    assert float(point.noise()) < 1e-9  # round-off, not the function's slope

    def jumps(values):  # x sits exactly on round's jump: one side moves by 1
        return torch.round(values["x"]), []

    at_jump = Point(jumps, {"x": torch.tensor([0.5, 2.0], dtype=torch.float64)},
                    eps=DEFAULT_EPS)
    assert at_jump.noise().tolist() == [0.0, 0.0]
