"""What a traced flow means: who a vanishing op starves, dead units of a model's layers, and
saturation a relu layer normally has (not reported in a model)."""

from __future__ import annotations

import torch

import gradscope
from gradscope.evidence.flow import FlowNode
from gradscope.explain.findings import dead_units, starved, unit_dim, zero_gradients
from gradscope.report.modules import grouped
from tests.paths import DATA


def _diags(report, kind):
    return [d for d in report.diagnostics if d.kind == kind]


def test_a_vanishing_op_tells_the_starved_inputs_from_those_that_keep_a_path():
    report = gradscope.check("sum(round(x) * w + x * y)")
    (diag,) = _diags(report, "vanishing_gradient")
    assert "the gradient of x loses the part that passes here" in diag.message
    (only,) = _diags(gradscope.check("sum(round(x) * w)"), "vanishing_gradient")
    assert "the gradient of x vanishes here" in only.message


def test_starved_means_an_all_zero_gradient():
    grads = {"a": torch.zeros(3), "b": torch.tensor([0.0, 1.0])}
    assert starved(["a", "b"], zero_gradients(grads)) == ["a"]
    assert starved(["a"], zero_gradients(None)) is None


def _node(blocked: torch.Tensor, passing: torch.Tensor) -> FlowNode:
    return FlowNode(1, "ReluBackward0", "relu", "saturation", "", blocked=blocked,
                    passing=passing, module="net.1")


def test_units_are_channels_of_images_and_features_otherwise():
    assert unit_dim((8, 3, 5, 5)) == 1 and unit_dim((2, 7, 16)) == 2 and unit_dim((4,)) == 0
    assert unit_dim(()) is None


def test_a_unit_is_dead_when_none_of_its_elements_passes_a_gradient():
    # 3 samples × 4 units: unit 1 never passes, unit 3 passes once, unit 0 got no gradient
    passing = torch.tensor([[0, 0, 1, 0], [0, 0, 1, 1], [0, 0, 1, 0]], dtype=torch.bool)
    blocked = torch.tensor([[0, 1, 0, 1], [0, 1, 0, 0], [0, 1, 0, 1]], dtype=torch.bool)
    dead, dim = dead_units(_node(blocked, passing))
    assert dim == 1 and dead.tolist() == [False, True, False, False]


def test_names_group_by_module_until_few_groups_are_left():
    names = [f"m.blocks.{b}.fc{k}.{p}" for b in range(2) for k in (1, 2)
             for p in ("weight", "bias")] + ["x"]
    assert grouped(names) == ("m.blocks.0.fc1 (2 tensors), m.blocks.0.fc2 (2 tensors), "
                              "m.blocks.1.fc1 (2 tensors), m.blocks.1.fc2 (2 tensors), x")
    assert grouped(names, limit=3) == "m.blocks.0 (4 tensors), m.blocks.1 (4 tensors), x"
    assert grouped(["a", "b"]) == "a, b"


def test_dead_relus_name_their_layer_the_dead_units_and_the_starved_tensors():
    report = gradscope.check(f"{DATA}/models.py:dead_loss", shape={"x": "4,8"})
    (diag,) = _diags(report, "saturation")
    assert diag.module == "dead.1" and diag.op == "relu"
    assert "16 of 16 unit(s) (dim 1) are dead for this batch" in diag.message
    assert "dead.0.bias, dead.0.weight, x get no gradient at all" in diag.message
    assert diag.indices == {"dead.1 dead units": [[k] for k in range(16)]}
    assert report.passed and not gradscope.check(f"{DATA}/models.py:dead_loss",
                                                 shape={"x": "4,8"}, fail_on="warning").passed


def test_an_ordinary_relu_layer_in_a_model_is_not_a_finding():
    report = gradscope.check(f"{DATA}/models.py:relu_loss", shape={"x": "16,8"})
    assert not _diags(report, "saturation") and report.passed
    # the same op in plain code keeps its per-element saturation report
    assert _diags(gradscope.check("relu(x)", x="-1,2"), "saturation")


def test_nan_in_a_models_forward_is_traced_to_its_module_and_line():
    report = gradscope.check(f"{DATA}/models.py:nan_loss", shape={"x": "4,8"})
    nan = _diags(report, "nan")
    assert nan and nan[0].module == "nan_net.2" and nan[0].op == "log"
    assert "models.py" in nan[0].where and "torch.log(self.proj(h))" in nan[0].where
    assert "`log` in nan_net.2 (" in nan[0].message


def test_dead_channels_of_a_convolution_are_counted_among_the_elements_given_a_gradient():
    report = gradscope.check(f"{DATA}/models.py:cnn_loss", shape={"x": "2,3,8,8"})
    (diag,) = _diags(report, "saturation")  # the first relu is ordinary: half blocked
    assert diag.module == "cnn" and "h = torch.relu(self.conv2(h))" in diag.where
    assert "3 of 8 unit(s) (dim 1) are dead" in diag.message
    assert "of the 256 element(s) that receive one" in diag.message  # max-pool: 1 in 4
    assert diag.indices == {"cnn dead units": [[0], [1], [2]]}


def test_nan_made_by_a_models_backward_names_its_module():
    report = gradscope.check(f"{DATA}/models.py:root_loss", shape={"x": "4,8"})
    nan = _diags(report, "nan")
    assert nan and nan[0].op == "sqrt" and nan[0].module == "root_net.1"
    assert "the backward of `sqrt` in root_net.1 (" in nan[0].message


def test_one_sided_sites_are_warnings_naming_how_to_reach_the_other_side():
    from gradscope.evidence.flow import Flow
    from gradscope.explain.findings import one_sided
    from gradscope.targets.base import BranchSite

    flow = Flow({}, None, branches=[BranchSite("f.py:3: x > 1", "gt", (("true", 0),
                                                                    ("false", 6))),
                                    BranchSite("f.py:4: x > 0", "gt", (("true", 3),
                                                                       ("false", 3)))])
    (chosen,) = one_sided(flow, ["x"], ["x"])
    assert chosen.kind == "one_sided_branch" and "false (6 of 6) (never true)" in chosen.message
    assert "gradscope chose for x spread over ±6.37" in chosen.hint
    (given,) = one_sided(flow, ["x"], [])
    assert "the values given all lie on one side" in given.hint
