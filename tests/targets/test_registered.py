"""Hooks registered before a check runs: wrapped where they are registered, carried to the
copies gradscope checks and to the leaves it differentiates, reporting their calls only while
a recording is open; torch's own registration methods are restored afterwards."""

from __future__ import annotations

import torch
from torch import nn

from gradscope.targets.registered import (
    WatchedHook,
    carry,
    deep_copy,
    hooks_by_name,
    hooks_on,
    registering,
    reporting,
)

ORIGINAL = (torch.Tensor.register_hook, nn.Module.register_full_backward_hook,
            nn.Module.register_full_backward_pre_hook, nn.Module.register_backward_hook)


def _halved_linear() -> nn.Linear:
    with registering():
        layer = nn.Linear(3, 1)
        layer.weight.register_hook(lambda g: g * 0.5)  # registered here, at this line
    return layer


def test_a_parameter_hook_is_recorded_with_its_line_and_torch_is_restored():
    layer = _halved_linear()
    (watched,) = hooks_on(layer.weight)
    assert isinstance(watched, WatchedHook) and watched.kind == "tensor"
    assert watched.where == "test_registered.py:27"
    assert hooks_on(layer.bias) == [] and hooks_by_name(layer) == {"weight": [watched]}
    assert (torch.Tensor.register_hook, nn.Module.register_full_backward_hook,
            nn.Module.register_full_backward_pre_hook,
            nn.Module.register_backward_hook) == ORIGINAL
    plain = torch.ones(2, requires_grad=True)
    plain.register_hook(lambda g: g)  # outside: torch's own, nothing recorded
    assert hooks_on(plain) == []


def test_a_deep_copy_carries_the_hooks_and_carry_hooks_a_leaf_once():
    layer = _halved_linear()
    twin = deep_copy(layer)
    assert [w.where for w in hooks_on(twin.weight)] == ["test_registered.py:27"]
    leaf = twin.weight.detach().clone().requires_grad_(True)
    hooks = hooks_by_name(twin)
    carry(hooks, {"weight": leaf})
    carry(hooks, {"weight": leaf})  # a second forward on the same leaf: not hooked twice
    carry(hooks, {"weight": torch.zeros(1, 3)})  # no grad (finite differences): no hook
    (grad,) = torch.autograd.grad((leaf * 2).sum(), [leaf])
    assert torch.equal(grad, torch.ones(1, 3))  # 2 · ½, once


def test_the_original_module_keeps_exactly_its_own_hook():
    layer = _halved_linear()
    deep_copy(layer)
    layer(torch.ones(1, 3)).sum().backward()
    assert torch.equal(layer.weight.grad, torch.full((1, 3), 0.5))


def test_module_hooks_report_what_they_were_given_while_a_recording_is_open():
    with registering():
        layer = nn.Linear(2, 2)
        layer.register_full_backward_hook(lambda m, gin, gout: (gin[0] * 3,))
        layer.register_full_backward_pre_hook(lambda m, gout: None)
    seen: list[tuple[str, list]] = []
    x = torch.ones(1, 2, requires_grad=True)
    with reporting(lambda w, pairs: seen.append((w.kind, pairs))):
        layer(x).sum().backward()
    kinds = [k for k, _ in seen]
    assert kinds == ["module pre", "module"]
    (given, returned), = seen[1][1]
    assert torch.equal(returned, given * 3)
    assert seen[0][1][0][1] is None  # the pre-hook returned None: the gradient as it was
    seen.clear()
    layer(x).sum().backward()  # no recording open: the hooks run, nothing is reported
    assert seen == []


def test_copies_over_shared_parameters_hold_the_model_once_and_convert_apart():
    import torch

    from gradscope.targets.registered import deep_copy_all

    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh())
    model.register_buffer("seen", torch.zeros(2))
    (copy,) = deep_copy_all({"m": model}, share_parameters=True).values()
    ours, theirs = copy[0].weight, model[0].weight
    assert ours is not theirs and ours.data_ptr() == theirs.data_ptr()  # one storage
    assert copy.seen.data_ptr() != model.seen.data_ptr()  # (buffers are the copy's own)
    was = theirs.detach().clone()
    copy.double()  # a conversion gives the copy storage of its own...
    assert copy[0].weight.dtype == torch.float64 and theirs.dtype == torch.float32
    assert torch.equal(theirs.detach(), was)  # ...and leaves the user's parameters as they were
    (plain,) = deep_copy_all({"m": model}).values()
    assert plain[0].weight.data_ptr() != theirs.data_ptr()
