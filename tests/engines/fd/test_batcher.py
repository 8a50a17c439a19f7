"""Perturbed evaluations in batches: vmap, a loop where vmap fails, batches sized by the
activations one evaluation keeps, halved when memory runs out."""

from __future__ import annotations

import pytest
import torch

from gradscope.engines.fd.batcher import Batcher
from gradscope.engines.fd.engine import FiniteDifferences
from gradscope.engines.fd.policy import DEFAULT_EPS
from tests.engines.fd import fd_of as _fd


def test_dense_input_uses_vmap_batches():
    fd, _ = _fd("sum(sin(x)**2) * mean(cos(x))", x=[0.1, 0.2, 0.3])
    col = fd.estimate("x")
    assert col.mode == "dense" and col.note == "vmap batches"
    x = torch.tensor([0.1, 0.2, 0.3], dtype=torch.float64, requires_grad=True)
    ((torch.sin(x) ** 2).sum() * torch.cos(x).mean()).backward()
    grad, _ = col.vjp(torch.tensor(1.0, dtype=torch.float64))
    assert torch.allclose(grad, x.grad, rtol=1e-9)


def test_loop_fallback_when_vmap_fails():
    def traced(values):
        x = values["x"]
        # .item() has no batching rule: vmap fails, the loop must take over
        return torch.stack([x.sum() * float(x.sum().item() != 12345)]), []

    fd = FiniteDifferences(traced, {"x": torch.tensor([1.0, 2.0], dtype=torch.float64)},
                           eps=DEFAULT_EPS, elementwise=set())
    col = fd.estimate("x")
    assert col.note.startswith("per-element loop")
    assert torch.allclose(col.partial, torch.ones(1, 2, dtype=torch.float64))


def test_a_loop_evaluates_the_base_point_once_not_once_per_column():
    # the unperturbed copies are evaluated like the perturbed ones so that a batched op's
    # summation order cannot read as a kink; one at a time, they are one evaluation
    calls = [0]

    def traced(values):
        calls[0] += 1
        x = values["x"]
        return torch.stack([(x * x).sum() * float(x.sum().item() != 12345)]), []

    x = torch.linspace(-1, 1, 20, dtype=torch.float64)
    fd = FiniteDifferences(traced, {"x": x}, eps=DEFAULT_EPS, elementwise=set(), probe=True)
    col = fd.estimate("x")
    assert torch.allclose(col.partial, 2 * x.reshape(1, -1), atol=1e-8)
    assert calls[0] <= 2 * 20 + 8  # two points per element, kinks looked for (was 65)


def _wide(values):
    """Small in, small out, a 200-fold wider intermediate (the shape of a CNN or an MLP)."""
    x = values["x"]
    hidden = torch.tanh(x.unsqueeze(-1) * torch.linspace(0.1, 1.0, 200, dtype=x.dtype))
    return hidden.mean(-1), []


def test_batches_count_activations_and_halve_on_allocation_failure(monkeypatch):
    x = torch.linspace(-1, 1, 40, dtype=torch.float64)
    fd = FiniteDifferences(_wide, {"x": x}, eps=DEFAULT_EPS, elementwise=set())
    assert fd.point.activations() >= 40 * 200  # the hidden layer, not just 40 in and 40 out
    original = Batcher._copies
    sizes = []

    def scarce(self, name, x, idx, h, points, halfway=None):
        sizes.append(len(idx))
        if len(idx) > 8:
            raise RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: "
                               "can't allocate memory")
        return original(self, name, x, idx, h, points, halfway)

    monkeypatch.setattr(Batcher, "_copies", scarce)
    grad, _ = fd.estimate("x").vjp(torch.ones(40, dtype=torch.float64))
    exact = (torch.linspace(0.1, 1.0, 200, dtype=torch.float64)
             / torch.cosh(x.unsqueeze(-1) * torch.linspace(0.1, 1.0, 200,
                                                           dtype=torch.float64)) ** 2).mean(-1)
    assert torch.allclose(grad, exact, rtol=1e-6)
    assert fd.batcher.memory_cap["x"] <= 8 and max(sizes) > 8  # tried, halved, remembered
    with pytest.raises(RuntimeError, match="boom"):  # other errors are not retried
        monkeypatch.setattr(Batcher, "_copies",
                            lambda *a: (_ for _ in ()).throw(RuntimeError("boom")))
        FiniteDifferences(_wide, {"x": x}, eps=DEFAULT_EPS, elementwise=set()).estimate("x")


def test_sampled_columns_reuse_one_batch_yet_a_target_writing_into_its_input_is_right():
    # the batch of perturbed copies is rewritten whole for each stencil point: a target that
    # writes into what it is given changes nothing the next point sees
    x = torch.linspace(-1, 1, 12, dtype=torch.float64)

    def traced(values):
        v = values["x"]
        out = (v * v).sum(-1, keepdim=True) * float(v.sum().item() != 12345)  # (no vmap)
        if not torch.equal(v, x):  # a perturbed copy: written into after it was read
            v.mul_(3.0)
        return out, []

    fd = FiniteDifferences(traced, {"x": x.clone()}, eps=DEFAULT_EPS, elementwise=set())
    col = fd.estimate("x")
    assert torch.allclose(col.partial, 2 * x.reshape(1, -1), atol=1e-7)


def test_sampled_columns_of_a_target_returning_its_input():
    def traced(values):
        return values["x"], []

    x = torch.linspace(-1, 1, 6, dtype=torch.float64)
    fd = FiniteDifferences(traced, {"x": x}, eps=DEFAULT_EPS, elementwise=set())
    jac, _ = fd.estimate("x").jacobian()
    assert torch.allclose(jac, torch.eye(6, dtype=torch.float64), atol=1e-8)
