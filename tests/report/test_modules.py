"""A model report's module roll-up, the order the forward ran its modules, where wrong
gradients start, and long lists of tensor names grouped by module."""

from __future__ import annotations

from gradscope.report.model import Column, Failure, InputReport
from gradscope.report.modules import (
    TOGETHER,
    forward_sorted,
    grouped,
    is_model,
    module_of,
    rollup,
    together,
    wrong_from,
)
from gradscope.report.status import Status


def _item(name: str, status: Status = Status.OK, role: str = "parameter") -> InputReport:
    return InputReport(name, role, [2], None, {"autograd": Column()}, None, 0.0, status,
                       checked=2, total=2)


def test_what_makes_a_model():
    assert is_model({"x": "input", "w": "parameter"})
    assert not is_model({f"x{k}": "input" for k in range(8)})
    assert is_model({f"x{k}": "input" for k in range(9)})


def test_the_rollup_takes_the_worst_status_of_each_module():
    items = [_item("x", role="input"), _item("a.fc.weight"),
             _item("a.fc.bias", Status.MISMATCH), _item("b.weight")]
    rows = {r["module"]: r for r in rollup(items)}
    assert rows[""]["status"] == Status.MISMATCH and rows[""]["tensors"] == 4
    assert rows["a.fc"]["failing"] == ["a.fc.bias"] and rows["b"]["status"] == Status.OK
    assert module_of("a.fc.weight") == "a.fc" and module_of("x") == ""


def test_wrong_gradients_start_in_forward_order():
    items = [_item(f"m{k}.weight", Status.MISMATCH if k < 5 else Status.OK) for k in range(9)]
    assert wrong_from(items) == ("m4.weight", "m5.weight", 4)
    # the forward ran m8 first and m0 last: the last failing in that order is m0
    order = [f"m{k}" for k in range(8, -1, -1)]
    assert forward_sorted(items, order)[0].name == "m8.weight"
    assert wrong_from(items, order) == ("m0.weight", None, 4)
    assert wrong_from(items[:3]) is None  # a handful of tensors: no "start" to speak of


def test_names_grouped_by_module_when_many():
    names = [f"blocks.{b}.fc{k}.weight" for b in range(3) for k in range(4)] + ["x"]
    assert grouped(names[:3]) == ", ".join(names[:3])
    assert grouped(names) == ("blocks.0 (4 tensors), blocks.1 (4 tensors), "
                              "blocks.2 (4 tensors), x")


def test_tensors_projected_only_together_are_set_aside_only_where_the_error_was_placed():
    items = [_item("a.weight", Status.INCONCLUSIVE), _item("b.weight", Status.INCONCLUSIVE),
             _item("c.weight", Status.MISMATCH)]
    failures = [Failure(Status.INCONCLUSIVE, "a.weight", 0, f"{TOGETHER}: the drill-down …"),
                Failure(Status.INCONCLUSIVE, "b.weight", 0, "no engine compared any element"),
                Failure(Status.MISMATCH, "c.weight", 3)]
    assert together(items, failures) == {"a.weight"}  # (b's reason is another: its own row)
    # no tensor mismatches: nothing placed the error, every inconclusive tensor keeps its row
    assert together(items[:2], failures[:2]) == set()
