"""Functions over modules (a global, a closure, a default argument, a bound method) have their
modules' parameters checked on copies, converted to the check's dtype; modules given directly
are converted on a copy too. The user's modules never change."""

from __future__ import annotations

import pytest
import torch

import gradscope
from gradscope.targets.closures import reached, rebuilt
from tests.data import models
from tests.paths import DATA

CASES = {
    "loss": ["x", "model.0.weight", "model.0.bias", "model.2.weight", "model.2.bias"],
    "closure_loss": ["x", "inner.weight", "inner.bias"],
    "default_loss": ["x", "net.0.weight", "net.0.bias", "net.1.weight", "net.1.bias"],
    "bound_score": ["x", "self.proj.weight", "self.proj.bias"],
}


@pytest.mark.parametrize("name", CASES)
def test_float32_modules_reached_by_a_function_are_checked_on_float64_copies(name):
    report = gradscope.check(f"{DATA}/models.py:{name}", x="randn(5,8)")
    assert report.passed and [i.name for i in report.inputs] == CASES[name]
    assert {i.role for i in report.inputs[1:]} == {"parameter"}
    assert any("float64 copy of the module (its own dtype: float32)" in n for n in report.notes)
    assert all(i.status_counts.get("ok") for i in report.inputs)


def test_the_users_modules_are_not_touched():
    before = {k: v.clone() for k, v in models.normed.state_dict().items()}
    weight = models.model[0].weight.clone()
    gradscope.check(models.loss, torch.randn(5, 8))
    gradscope.check(models.normed, torch.randn(5, 8))  # a module given directly: a copy too
    assert torch.equal(models.model[0].weight, weight)
    assert models.model[0].weight.dtype == torch.float32
    after = models.normed.state_dict()
    assert all(torch.equal(before[k], after[k]) and before[k].dtype == after[k].dtype
               for k in before)


def test_reached_and_rebuilt_follow_only_the_functions_own_names():
    assert set(reached(models.loss)) == {"model"}
    assert set(reached(models.closure_loss)) == {"inner"}
    assert set(reached(models.default_loss)) == {"net"}
    assert set(reached(models.bound_score)) == {"self"}
    copy = torch.nn.Sequential(torch.nn.Linear(8, 6), torch.nn.GELU(), torch.nn.Linear(6, 2))
    fn = rebuilt(models.loss, {"model": copy})
    x = torch.randn(3, 8)
    assert torch.allclose(fn(x), copy(x).pow(2).mean())
    assert reached(lambda x: x * 2) == {}


def test_a_model_given_as_an_argument_is_checked_on_a_copy_under_its_parameters_name():
    before = {n: p.detach().clone() for n, p in models.model.named_parameters()}
    report = gradscope.check(models.step, models.model, torch.randn(4, 8))
    assert report.passed
    assert [i.name for i in report.inputs] == [
        "batch", "model.0.weight", "model.0.bias", "model.2.weight", "model.2.bias"]
    assert all(torch.equal(p, before[n]) for n, p in models.model.named_parameters())
    assert models.model[0].weight.dtype == torch.float32 and models.model[0].weight.grad is None


def test_arg_names_an_object_of_the_targets_file(capsys):
    from tests.command import run

    code, out, _ = run(capsys, "check", f"{DATA}/models.py:step", "--arg", "model=model",
                       "--shape", "batch=4,8")
    assert code == 0 and "model.2" in out and "5 input(s): 100 ok" in out
    code, _, err = run(capsys, "check", f"{DATA}/models.py:step", "--arg", "model=modle",
                       "--shape", "batch=4,8")
    assert code == 2 and "`modle` is not defined at the top of" in err and "models.py" in err
    code, _, err = run(capsys, "check", f"{DATA}/models.py:step", "--arg", "model=import")
    assert code == 2 and "is not a Python literal" in err


def test_a_module_instance_in_train_mode_keeps_its_running_statistics():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3)).double()
    before = {n: b.clone() for n, b in net.named_buffers()}
    report = gradscope.check(net, torch.randn(5, 4, dtype=torch.float64))
    assert report.passed  # the dtype matched: before, the user's own module was evaluated
    assert all(torch.equal(b, before[n]) for n, b in net.named_buffers())
    assert any(n.startswith("batch norm in train mode (1)") for n in report.notes)
    evaluated = gradscope.check(net, torch.randn(5, 4, dtype=torch.float64), mode="eval")
    assert not any("batch norm" in n for n in evaluated.notes) and net.training


def test_running_statistics_are_left_alone_while_values_are_batched():
    from gradscope.targets.closures import batch_statistics_only, tracking_layers

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3), torch.nn.BatchNorm2d(3),
                              torch.nn.InstanceNorm2d(3, track_running_stats=True)).double()
    frozen = torch.nn.BatchNorm2d(3).double().eval()
    layers = tracking_layers(torch.nn.Sequential(net, frozen))
    assert layers == [net[1], net[2]]  # (eval mode reads its running statistics: kept)
    xs = torch.randn(4, 2, 2, 5, 5, dtype=torch.float64)
    with pytest.raises(RuntimeError):
        torch.func.vmap(net)(xs)
    before = {n: b.clone() for n, b in net.named_buffers()}
    with batch_statistics_only(layers):
        batched = torch.func.vmap(net)(xs)
    assert net[1].track_running_stats and net[1].running_mean is not None
    assert all(torch.equal(before[n], b) for n, b in net.named_buffers())
    looped = torch.stack([net(x) for x in xs])  # (this updates them: the values are the same)
    assert torch.allclose(batched, looped, atol=1e-12)


def test_a_module_on_another_device_is_moved_as_a_copy():
    from gradscope.targets import resolve

    target = resolve(models.loss)
    target.convert(torch.float64, torch.device("meta"))  # any other device: no GPU in CI
    assert all(p.device.type == "meta" for p in target.module.parameters())
    assert all(p.device.type == "meta" for p in target.parameters.values())
    assert any("float64 copy of the module on meta" in n for n in target.notes)
    assert models.model[0].weight.device.type == "cpu"
    same = resolve(models.loss)
    same.convert(torch.float32, torch.device("cpu"))  # already there, in that dtype
    assert not any("copy of the module" in n for n in same.notes)


def test_arg_reaches_only_modules_by_name(capsys):
    from tests.command import run

    # `torch` is imported in the file, `loss` is a function there: neither is a model
    for value, what in (("torch", "is a module, not an nn.Module"),
                        ("loss", "is a function, not an nn.Module")):
        code, _, err = run(capsys, "check", f"{DATA}/models.py:step", "--arg", f"model={value}")
        assert code == 2 and what in err
    code, _, err = run(capsys, "check", f"{DATA}/models.py:step", "--arg", "model=os.system")
    assert code == 2 and "is not a Python literal" in err


def test_modules_named_like_a_modules_own_attributes_are_held_and_checked():
    # (a global module called `fn` once met the holder's own attribute: exit 4)
    report = gradscope.check(f"{DATA}/module_names.py:loss", shape={"x": (4, 3)})
    assert report.passed
    names = {i.name for i in report.inputs}
    assert {"fn.weight", "fn.bias", "training_.weight", "training_.bias"} <= names
