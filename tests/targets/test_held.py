"""Parameters held for the whole forward AND backward: a reversible block whose Function re-runs
its sub-modules inside backward passes, its planted twin fails with the factor, and after the
check every module holds its own parameters again — the same objects, the same values."""

from __future__ import annotations

import torch

import gradscope
from gradscope.targets.held import Slots, holdable
from tests.data import reversible
from tests.paths import DATA

REV = f"{DATA}/reversible.py"


def test_a_reversible_block_that_reruns_its_modules_in_backward_passes():
    report = gradscope.check(f"{REV}:RevBlock", shape={"x": (3, 4)})
    assert report.passed, report.to_text()
    assert {i.name for i in report.inputs} >= {"x", "f.0.weight", "g.0.bias"}


def test_its_planted_twin_fails_with_the_factor_on_every_parameter():
    report = gradscope.check(f"{REV}:RevBlockBug", shape={"x": (3, 4)})
    assert not report.passed
    wrong = {i.name for i in report.inputs if i.status == "mismatch"}
    assert wrong == {"f.0.weight", "f.0.bias", "g.0.weight", "g.0.bias"}
    assert "1.5 × the derivative" in report.to_text()


def test_a_block_that_frees_its_inputs_memory_until_backward_passes_and_its_twin_fails():
    # (GroupAddRev's way: every call of the user's code gets inputs of its own storage, so
    # freeing them never reaches gradscope's values — before, a read of the freed memory)
    right = gradscope.check(f"{REV}:FreeingRevBlock", shape={"x": (3, 4)})
    assert right.passed, right.to_text()
    wrong = gradscope.check(f"{REV}:FreeingRevBlockBug", shape={"x": (3, 4)})
    assert not wrong.passed and "1.5 × the derivative" in wrong.to_text()


def test_a_function_over_a_global_block_passes_and_the_block_keeps_its_parameters():
    own = {n: (p, p.detach().clone()) for n, p in reversible.BLOCK.named_parameters()}
    report = gradscope.check(f"{REV}:rev_loss", shape={"x": (3, 4)})
    assert report.passed, report.to_text()
    for name, p in reversible.BLOCK.named_parameters():
        assert p is own[name][0] and torch.equal(p, own[name][1])


def test_a_module_instance_holds_its_own_parameters_after_the_check():
    block = reversible.RevBlock().double()
    own = dict(block.named_parameters())
    assert gradscope.check(block, torch.randn(3, 4, dtype=torch.float64)).passed
    assert {n: p for n, p in block.named_parameters()} == own
    assert all(type(p) is torch.nn.Parameter for p in block.parameters())


def test_slots_hold_tied_names_together_and_restore_the_same_objects():
    lin = torch.nn.Linear(2, 2)
    model = torch.nn.Sequential(lin, torch.nn.Tanh(), lin)  # one layer reached twice
    slots = Slots(model, {"0.weight": ["2.weight"], "0.bias": ["2.bias"]})
    weight = lin.weight
    stand_in = torch.zeros(2, 2, requires_grad=True)
    slots.hold({"0.weight": stand_in})
    assert model[0].weight is stand_in and model[2].weight is stand_in
    slots.restore()
    assert model[0].weight is weight and isinstance(model[0].weight, torch.nn.Parameter)


def test_a_batched_tensor_is_never_held_past_its_call():
    seen = []
    torch.func.vmap(lambda t: seen.append(holdable(t)) or t.sum())(torch.randn(3, 2))
    assert seen == [False] and holdable(torch.randn(2))


def test_a_call_that_made_no_graph_gives_its_slots_back():
    # finite differences call the model with perturbed copies of its parameters and build no
    # graph: no backward can re-run that call, so what the slots held before comes back (a
    # model-sized copy held until the next call stood beside the next one's)
    net = torch.nn.Linear(3, 2).double()
    own = net.weight
    slots = Slots(net, {"weight": []})
    leaf = own.detach().clone().requires_grad_()
    slots.hold({"weight": leaf})
    before = slots.lent({"weight": own.detach() + 1.0})
    slots.given_back(before)
    assert net._parameters["weight"] is leaf
    # nothing held before: the module's own parameter comes back
    slots.restore()
    slots.given_back(slots.lent({"weight": own.detach() + 1.0}))
    assert net._parameters["weight"] is own and not slots.own


def test_only_graphless_calls_of_a_module_target_give_back_what_they_held():
    from gradscope.targets.code import _graphless

    x = torch.ones(2, requires_grad=True)
    assert _graphless(torch.ones(2)) and _graphless((torch.ones(2), 3, None, {"a": []}))
    assert not _graphless(x * 2) and not _graphless({"loss": x.sum()})
    assert not _graphless(object())  # (an object of the user's may hold a graph: kept)
