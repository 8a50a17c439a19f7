"""Watching one forward of a model: each autograd node's module, NaN origins, no trace left."""

from __future__ import annotations

import torch

from gradscope.targets.scopes import watching
from gradscope.tensors import grad_nodes
from tests.data.models import Scaled, UsesScaled, nan_net


def _leaves(module: torch.nn.Module, **inputs: torch.Tensor) -> dict[str, torch.Tensor]:
    found = {n: p.detach().clone().requires_grad_(True) for n, p in module.named_parameters()}
    return {**found, **{n: t.requires_grad_(True) for n, t in inputs.items()}}


def _call(module: torch.nn.Module, leaves: dict[str, torch.Tensor], *args: torch.Tensor):
    params = {n: leaves[n] for n, _ in module.named_parameters()}
    return torch.func.functional_call(module, params, args)


def test_every_node_is_mapped_to_the_innermost_module_it_ran_in():
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    leaves = _leaves(net, x=torch.randn(2, 3))
    with watching(net, leaves) as seen:
        out = _call(net, leaves, leaves["x"]).sum()
    names: dict[str, list[str | None]] = {}
    for fn in grad_nodes(out.grad_fn):
        if not hasattr(fn, "variable"):
            names.setdefault(fn.name(), []).append(seen.modules.get(id(fn)))
    assert names["TanhBackward0"] == ["1"]
    assert sorted(names["AddmmBackward0"]) == ["0", "2"]
    assert names["SumBackward0"] == [""]  # after the module returned: the top level


def test_a_custom_functions_node_belongs_to_the_module_that_called_it():
    net = UsesScaled()
    leaves = _leaves(net, x=torch.randn(2, 4))
    with watching(net, leaves) as seen:
        out = _call(net, leaves, leaves["x"])
    scaled = [fn for fn in grad_nodes(out.grad_fn) if "Scaled" in fn.name()]
    assert scaled and seen.modules[id(scaled[0])] == ""
    assert seen.modules[id(out.grad_fn)] == ""


class ScaledOut(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return Scaled.apply(x)  # returned unconsumed: the module's own


def test_a_custom_functions_node_returned_by_a_module_is_that_modules():
    net = torch.nn.Sequential(torch.nn.Linear(4, 4), ScaledOut(), torch.nn.Linear(4, 1))
    leaves = _leaves(net, x=torch.randn(2, 4))
    with watching(net, leaves) as seen:
        out = _call(net, leaves, leaves["x"])
    scaled = [fn for fn in grad_nodes(out.grad_fn) if "Scaled" in fn.name()]
    assert [seen.modules[id(fn)] for fn in scaled] == ["1"]


def test_the_first_op_to_make_nan_from_finite_inputs_is_the_origin():
    torch.manual_seed(0)
    leaves = _leaves(nan_net, x=torch.randn(4, 8))
    with watching(nan_net, leaves) as seen:
        _call(nan_net, leaves, leaves["x"]).sum()
    op, module, line, inputs, count = seen.origins[0]
    assert (op, module) == ("log", "2") and "torch.log(self.proj(h))" in line
    assert "x" in inputs and "2.proj.weight" in inputs and count > 0
    assert len(seen.origins) == 1  # the sum of NaN is no new origin


def test_hooks_are_removed_and_the_mode_left():
    net = torch.nn.Linear(2, 2)
    with watching(net, {}):
        pass
    assert not net._forward_hooks and not net._forward_pre_hooks
    assert not torch.overrides._get_current_function_mode()


def test_a_scripted_submodule_takes_no_hooks_and_its_ops_go_to_its_caller():
    scripted = torch.jit.script(torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Tanh()))
    net = torch.nn.Sequential(torch.nn.Linear(3, 3), scripted)
    leaves = _leaves(net, x=torch.randn(2, 3))
    with watching(net, leaves) as seen:
        out = _call(net, leaves, leaves["x"]).sum()
    assert seen.entered == ["", "0"]  # "1" is scripted: no hooks
    tanh = [fn for fn in grad_nodes(out.grad_fn) if fn.name() == "TanhBackward0"]
    assert [seen.modules.get(id(fn)) for fn in tanh] == [""]


def test_a_scripted_submodule_is_checked_and_converted_quietly():
    import warnings

    import gradscope

    scripted = torch.jit.script(torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Tanh()))
    net = torch.nn.Sequential(torch.nn.Linear(3, 3), scripted)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report = gradscope.check(net, torch.randn(2, 3))
    assert report.passed and len(report.inputs) == 5


def test_branches_on_the_inputs_are_counted_per_line_and_constants_are_not():
    x = torch.linspace(-2, 2, 9, dtype=torch.float64).requires_grad_(True)
    mask = torch.ones(9) > 0  # no input in it: no branch of the inputs
    with watching(None, {"x": x}) as seen:
        for _ in range(2):  # one line, two calls: summed
            y = torch.where(x > 0.5, x, -x)
        y = torch.relu(y - 1).clamp(max=0.5) * mask
        _ = torch.ones(3) < 2  # constants only
        _ = x.detach() < 0  # no gradient: not a branch of what is checked
    counts = {op: dict(c) for (_, op), c in seen.branches.items()}
    assert counts == {"gt": {"true": 6, "false": 12}, "relu": {"< 0": 3, "= 0": 2, "> 0": 4},
                      "clamp": {"below its min": 0, "inside": 7, "above its max": 2}}
    assert all(line.startswith("test_scopes.py:") for line, _ in seen.branches)
