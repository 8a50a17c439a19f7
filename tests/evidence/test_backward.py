"""autograd's side of the evidence: exactly y.backward(v), a refused custom backward a
diagnostic, user code's flow traced once more, a random forward refused, the precision the
target computes in."""

from __future__ import annotations

import pytest
import torch

from gradscope.errors import TargetError, UsageError
from gradscope.evidence.backward import backward, computed_in, deterministic, with_flow
from gradscope.evidence.prepare import prepare
from gradscope.options import Options, Request
from tests.paths import DATA


def _prepared(target: str, **options):
    return prepare(Request("check", target, Options(**options)))


def test_the_gradients_of_y_backward_v_and_the_flow_it_recorded():
    prepared = _prepared("sum(round(x) * w)", at={"x": "0.2,1.7", "w": "1,2"})
    back = backward(prepared)
    assert back.grads["x"].tolist() == [0.0, 0.0] and back.grads["w"].tolist() == [0.0, 2.0]
    assert back.flow is not None  # an expression's own backward was watched
    assert with_flow(prepared, back) is back


def test_user_codes_flow_needs_one_more_watched_backward():
    prepared = _prepared(f"{DATA}/functions.py:floor_plus", at={"x": "0.5,1.5"})
    back = backward(prepared)
    assert back.flow is None
    traced = with_flow(prepared, back).flow
    assert traced is not None and any(n.status == "vanishing" for n in traced.walk())


def test_the_flow_traces_backward_is_the_determinism_checks_second_run():
    steady = _prepared(f"{DATA}/backwards.py:Cube", at={"x": "0.5,1.5"})
    assert with_flow(steady, backward(steady)).repeated
    noisy = _prepared(f"{DATA}/backwards.py:Noisy", at={"x": "0.5,1.5"})
    assert not with_flow(noisy, backward(noisy)).repeated  # (the check runs its own then)
    asked = _prepared(f"{DATA}/backwards.py:Cube", at={"x": "0.5,1.5"}, autocast="bfloat16")
    assert not with_flow(asked, backward(asked)).repeated  # another forward than autograd's


def test_a_refused_backward_and_a_raising_one():
    back = backward(_prepared(f"{DATA}/backwards.py:WrongShape", shape={"*": (2, 3)}))
    assert back.grads is None and back.failure.kind == "backward_shape"
    with pytest.raises(TargetError, match="SystemExit"):
        backward(_prepared(f"{DATA}/targets.py:ExitsInBackward"))


def test_a_random_forward_is_refused():
    prepared = _prepared(f"{DATA}/models.py:dropout_loss", mode="train")
    with pytest.raises(UsageError, match="is random"):
        deterministic(prepared, prepared.target.forward(prepared.bound.cast))


def test_the_precision_the_target_computes_in():
    prepared = _prepared(f"{DATA}/corpus.py:tanh_in_float32", at={"x": "0.5"})
    assert computed_in(prepared, torch.zeros(1, dtype=torch.float32)) == torch.float32
    assert computed_in(prepared, torch.zeros(1, dtype=torch.float64)) == torch.float64


def test_a_step_in_float32_between_float64_ends_sets_the_precision(capsys):
    import json

    from tests.command import run
    from tests.paths import DATA

    code, out, _ = run(capsys, "check", f"{DATA}/coarse.py:inner_float", "--shape", "x=300",
                       "--format", "json")
    report = json.loads(out)
    assert code == 0 and report["inputs"][0]["status_counts"] == {"ok": 300}
    assert any("a step of its forward does" in n for n in report["notes"])
    code, out, _ = run(capsys, "check", f"{DATA}/coarse.py:inner_float_bug", "--shape",
                       "x=300", "--format", "json")
    report = json.loads(out)
    culprits = [d["op"] for d in report["diagnostics"] if d["kind"] == "culprit"]
    assert code == 1 and culprits and culprits[0].startswith("Sin32Bug.backward")


def test_a_tensor_changed_in_place_after_an_op_saved_it_names_the_line_that_changed_it():
    # no node made it (torch's message says no "output of"): the shape and version decide
    with pytest.raises(TargetError) as raised:
        backward(_prepared(f"{DATA}/changed_in_place.py:shifted", shape={"x": (4,)}))
    line = next(k for k, code in enumerate((DATA / "changed_in_place.py").read_text()
                                           .splitlines(), 1) if "w += 1" in code)
    assert f"changed by `w += 1` (in shifted, changed_in_place.py:{line})" in str(raised.value)


def test_a_saved_tensor_changed_in_place_names_the_users_line_that_saved_it():
    with pytest.raises(TargetError) as raised:
        backward(_prepared(f"{DATA}/changed_in_place.py:clobbered", shape={"x": (4,)}))
    text = str(raised.value)
    assert "modified by an inplace operation" in text
    line = next(k for k, code in enumerate((DATA / "changed_in_place.py").read_text()
                                           .splitlines(), 1) if "= x.sigmoid()" in code)
    assert f"saved for backward by `y = x.sigmoid()` (in clobbered, changed_in_place.py:{line})" \
        f" and changed by `y.mul_(2)` (in clobbered, changed_in_place.py:{line + 1})" in text
    assert backward(_prepared(f"{DATA}/changed_in_place.py:cloned",
                              shape={"x": (4,)})).grads is not None


def test_a_saved_tensor_changed_through_an_alias_that_shares_its_version_is_named():
    # `y.detach().mul_(2)`: the alias has no node of its own; its shape and version decide
    with pytest.raises(TargetError) as raised:
        backward(_prepared(f"{DATA}/changed_in_place.py:through_detach", shape={"x": (4,)}))
    line = next(k for k, code in enumerate((DATA / "changed_in_place.py").read_text()
                                           .splitlines(), 1) if "y.detach().mul_(2)" in code)
    assert f"changed by `y.detach().mul_(2)` (in through_detach, changed_in_place.py:{line})" \
        in str(raised.value)
