"""The finite-difference engine: accuracy, batching, kink detection, error estimates."""

from __future__ import annotations

import torch

from tests.engines.fd import fd_of as _fd


def test_elementwise_jacobian_is_diagonal_with_broadcast():
    fd, _ = _fd("x * y", x=[[1.0], [2.0]], y=[3.0, 4.0, 5.0])
    jac, _ = fd.estimate("y").jacobian()
    assert jac.shape == (6, 3)
    want = torch.tensor([[1, 0, 0], [0, 1, 0], [0, 0, 1], [2, 0, 0], [0, 2, 0], [0, 0, 2]],
                        dtype=torch.float64)
    assert torch.allclose(jac, want, atol=1e-10)


def test_kinks_are_flagged_per_op_and_refined():
    fd, target = _fd("abs(x) + clamp(x, 0, 1)", x=[0.0, 1e-6, 0.5, 1.0, 2.0])
    col = fd.estimate("x")
    assert col.kink.tolist() == [True, False, False, True, False]
    sites = [s.where for s in target.branch_sites]
    assert sites == ["abs(x)", "clamp(x, 0, 1)"]
    assert col.kink_by_branch[0].tolist() == [True, False, False, False, False]
    assert col.kink_by_branch[1].tolist() == [True, False, False, True, False]
    assert col.forward_calls > 4  # the element at 1e-6 needed smaller steps


def test_directional_derivative():
    fd, _ = _fd("x * y", x=[1.0, 2.0], y=[3.0, 4.0])
    d = fd.directional({"x": torch.tensor([1.0, 1.0]), "y": torch.tensor([0.0, 1.0])})
    assert torch.allclose(d.value, torch.tensor([3.0, 6.0], dtype=torch.float64))
    assert not bool(d.kink.any())


def test_directional_without_measured_noise_saves_two_calls_and_keeps_the_value():
    from gradscope.engines.fd import FiniteDifferences
    from gradscope.engines.fd.policy import DEFAULT_EPS

    calls = []

    def traced(values):
        calls.append(1)
        return (values["x"] ** 3).sum().reshape(1), []

    x = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    t = {"x": torch.tensor([1.0, 0.5, -1.0], dtype=torch.float64)}
    measured = FiniteDifferences(traced, {"x": x}, eps=DEFAULT_EPS, elementwise=set())
    calls.clear()
    full = measured.directional(t)
    with_noise = len(calls)
    quick = FiniteDifferences(traced, {"x": x}, eps=DEFAULT_EPS, elementwise=set())
    calls.clear()
    cheap = quick.directional(t, measured_noise=False)
    assert len(calls) == with_noise - 2 == 4
    assert torch.allclose(cheap.value, full.value) and bool((cheap.error <= full.error).all())


def _directional_of(traced, x, t):
    from gradscope.engines.fd import FiniteDifferences
    from gradscope.engines.fd.policy import DEFAULT_EPS

    fd = FiniteDifferences(traced, {"x": x}, eps=DEFAULT_EPS, elementwise=set())
    return fd, fd.directional({"x": t})


def test_directional_points_share_one_buffer_yet_a_target_returning_its_input_is_right():
    # every stencil point writes the perturbed copy into one buffer: an output that is that
    # buffer (or a view of it) is copied before the next point writes over it
    x = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    t = torch.tensor([1.0, 0.5, -1.0], dtype=torch.float64)
    _, d = _directional_of(lambda v: (v["x"], []), x, t)
    assert torch.allclose(d.value, t, atol=1e-9)
    _, d = _directional_of(lambda v: (v["x"][1:], []), x, t)
    assert torch.allclose(d.value, t[1:], atol=1e-9)


def test_directional_tangent_of_another_dtype_and_a_callers_scratch_kept_across_calls():
    x = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    t32 = torch.tensor([1.0, 0.5, -1.0], dtype=torch.float32)
    fd, d = _directional_of(lambda v: ((v["x"] ** 3).sum().reshape(1), []), x, t32)
    want = (3 * x * x * t32.double()).sum()
    assert torch.allclose(d.value, want.reshape(1), rtol=1e-8)
    scratch: dict[str, torch.Tensor] = {}
    first = fd.directional({"x": t32}, scratch=scratch)
    held = scratch["x"]
    again = fd.directional({"x": t32 * 2}, scratch=scratch)
    assert scratch["x"] is held  # (one buffer for both calls)
    assert torch.allclose(first.value, want.reshape(1), rtol=1e-8)
    assert torch.allclose(again.value, 2 * want.reshape(1), rtol=1e-8)


def test_directional_each_point_is_a_tensor_of_its_own_for_code_that_caches_by_tensor():
    cache: dict[int, torch.Tensor] = {}
    seen: list[torch.Tensor] = []

    def traced(v):  # caches its result by the input's identity (held, so ids stay unique)
        x = v["x"]
        seen.append(x)
        if id(x) not in cache:
            cache[id(x)] = (x ** 2).sum().reshape(1)
        return cache[id(x)], []

    x = torch.tensor([1.0, 2.0], dtype=torch.float64)
    _, d = _directional_of(traced, x, torch.tensor([1.0, 0.0], dtype=torch.float64))
    assert torch.allclose(d.value, torch.tensor([2.0], dtype=torch.float64), rtol=1e-7)
