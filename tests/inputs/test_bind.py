"""Binding: the inputs of a target from options (sizes bounded up front), --grad, tangents."""

from __future__ import annotations

import pytest
import torch

import gradscope
from gradscope.errors import UsageError
from gradscope.inputs.bind import Upstream, bind, tangents_for, value_of
from gradscope.options import Options, Request, from_values
from gradscope.runner import prepare
from gradscope.targets import resolve
from tests.paths import DATA


def test_bind_builds_seeded_inputs_in_the_domain_and_casts_them():
    options = from_values({"shape": {"c": (4,)}, "dtype": "float32", "seed": 3})
    bound = bind(options, resolve("log(c) * x"))
    assert bound.upstream.ones and tuple(bound.cast) == ("c", "x")
    assert bound.values["c"].tensor.shape == (4,) and bool((bound.values["c"].tensor > 0).all())
    assert bound.values["x"].tensor.shape == (4,)  # its sibling's, in an elementwise expression
    assert all(t.dtype == torch.float32 for t in bound.cast.values())
    assert all(t.dtype == torch.float64 for t in bound.exact.values())
    again = bind(options, resolve("log(c) * x"))
    assert torch.equal(again.cast["c"], bound.cast["c"])


def test_a_default_shape_applies_to_every_unnamed_input():
    bound = bind(from_values({"shape": "2,5"}), resolve("x * y"))
    assert bound.cast["x"].shape == (2, 5) and bound.cast["y"].shape == (2, 5)


def test_names_are_checked_against_the_target():
    with pytest.raises(UsageError, match="--at names `z`, which is not an input"):
        bind(from_values({"at": {"z": "1"}}), resolve("x * 2"))
    with pytest.raises(UsageError, match="name the tangent's input"):
        bind(from_values({"tangent": "1"}), resolve("a * b"))


def test_sizes_are_bounded_before_anything_is_allocated():
    options = from_values({"shape": {"x": (6,), "y": (6,)}, "max_elements_total": 10})
    with pytest.raises(UsageError, match="the limit is 10"):
        bind(options, resolve("x * y"))
    with pytest.raises(UsageError, match="more than the limit"):
        value_of(torch.zeros(11), "--at x", 0, "x", limit=10)


def test_given_tensors_must_be_finite_and_real():
    with pytest.raises(UsageError, match="NaN and infinity are not allowed"):
        value_of(torch.tensor([1.0, float("inf")]), "--at x", 0, "x")
    with pytest.raises(UsageError, match="not supported"):
        value_of(torch.tensor([True]), "--at x", 0, "x")


def test_upstream_must_match_the_output_shape():
    out = torch.zeros(2, 3)
    assert torch.equal(Upstream().tensor_for(out), torch.ones(2, 3))
    assert Upstream().ones and Upstream().source == "ones"
    grad = Upstream(value_of("1,2,3", "--grad", 0, ":grad"))
    assert grad.source == "--grad" and not grad.ones
    with pytest.raises(UsageError, match=r"--grad has shape \(3,\) but the output has shape "
                                         r"\(2, 3\)"):
        grad.tensor_for(out)


def test_tangents_broadcast_to_their_input_and_default_to_zeros():
    leaves = {"x": torch.zeros(2, 3), "y": torch.zeros(3)}
    t = tangents_for({"x": "1,2,3"}, leaves, seed=0)
    assert torch.equal(t["x"], torch.tensor([[1.0, 2, 3], [1, 2, 3]], dtype=torch.float64))
    assert torch.equal(t["y"], torch.zeros(3, dtype=torch.float64))
    with pytest.raises(UsageError, match=r"--tangent y has shape \(2,\)"):
        tangents_for({"y": "1,2"}, leaves, seed=0)


def test_order_two_moves_grad_inside_and_checks_with_ones():
    prepared = prepare(Request("check", "x**3", Options(at={"x": "1,2"}, grad="1,3", order=2)))
    target, bound = prepared.target, prepared.bound
    assert bound.upstream.ones  # the outer upstream is ones
    out = target.forward(bound.cast)
    assert torch.allclose(out, torch.tensor([3.0, 36.0], dtype=torch.float64))  # 3·x²·v


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor")
def test_tensors_without_plain_values_are_usage_errors():
    for tensor, kind in ((torch.empty(3, device="meta"), "meta"),
                         (torch.eye(3).to_sparse(), "sparse"),
                         (torch.quantize_per_tensor(torch.ones(3), 0.1, 0, torch.quint8),
                          "quantized")):
        with pytest.raises(UsageError, match=kind):
            value_of(tensor, "--at x", 0, "x")


def test_given_value_and_shape_for_one_input_is_refused():
    with pytest.raises(UsageError, match="give one of them"):
        bind(from_values({"at": {"x": "1,2"}, "shape": {"x": (3,)}}), resolve("x * 2"))


def test_values_that_overflow_the_dtype_are_refused():
    with pytest.raises(UsageError, match="overflow float16"):
        bind(from_values({"at": {"x": "1e6"}, "dtype": "float16"}), resolve("x * 2"))


def test_default_shapes_come_from_siblings_a_modules_first_layer_or_are_named():
    import gradscope
    from tests.paths import DATA

    report = gradscope.check("sin(x) * y", x="1,2,3,4")
    y = {i.name: i for i in report.inputs}["y"]
    assert y.shape == [4] and "the shape of the other inputs" in y.origin
    report = gradscope.check("sum(x @ y)")
    assert all("default shape (25,)" in i.origin for i in report.inputs)
    with pytest.raises(gradscope.UsageError, match=r"y had \(25,\).*--shape y="):
        gradscope.check("sum(sin(x) * y)", shape={"x": [50]})
    report = gradscope.check(f"{DATA}/targets.py:TwoLayers")
    x = {i.name: i for i in report.inputs}["x"]
    assert x.shape == [2, 4] and "Linear(in_features=4" in x.origin and report.passed


def test_a_module_without_a_telling_layer_is_shaped_like_its_first_parameter():
    import gradscope
    from tests.paths import SEEDS

    report = gradscope.check(f"{SEEDS}:MyLayer", init={"size": 3})
    item = {i.name: i for i in report.inputs}["input"]
    assert item.shape == [3, 3] and "first parameter mytensor" in item.origin and report.passed


def test_two_chosen_inputs_never_get_the_same_values():
    # randperm(7) orders x's and y's spread alike for their seeds: y draws its next seed
    report = gradscope.check("x*y", dtype="float16")
    x, y = report.inputs
    assert x.values != y.values and sorted(x.values) == sorted(y.values)
    assert "manual_seed(141782672656065)" in y.origin  # the seed actually used is shown


def test_an_optional_argument_an_option_gives_becomes_an_input_or_data():
    target = f"{DATA}/targets.py:weighted_loss"
    plain = gradscope.check(target, x="randn(2,3)")
    assert [i.name for i in plain.inputs] == ["x"] and plain.passed
    labelled = gradscope.check(target, x="randn(2,3)", const={"labels": torch.tensor([0, 2])})
    assert [i.name for i in labelled.inputs] == ["x"] and labelled.passed
    weighted = gradscope.check(target, x="randn(2,3)", at={"weights": "2,3"},
                               const={"labels": torch.tensor([1, 1])})
    assert [i.name for i in weighted.inputs] == ["x", "weights"] and weighted.passed
    with pytest.raises(UsageError, match="`scale"):
        gradscope.check(target, x="randn(2,3)", at={"scale": "2"})  # a number: --arg
    with pytest.raises(UsageError, match="`label`, which is not an input"):
        gradscope.check(target, x="randn(2,3)", const={"label": torch.tensor([1, 1])})


def test_a_module_parameter_is_bound_as_itself_never_copied():
    model = torch.nn.Linear(3, 2).double()
    target = resolve(model)
    target.ready()
    bound = bind(from_values({}), target)
    name = next(n for n in target.parameters if n.endswith("weight"))
    assert bound.values[name].tensor.data_ptr() == target.parameters[name].data_ptr()
    assert bound.cast[name].data_ptr() == target.parameters[name].data_ptr()
    bad = torch.nn.Linear(3, 2).double()
    with torch.no_grad():
        bad.weight[0, 0] = float("nan")
    with pytest.raises(UsageError, match="NaN and infinity are not allowed"):
        bind(from_values({}), resolve(bad))
