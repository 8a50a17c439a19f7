"""Torch's documented departures: excused where autograd with the departure undone agrees (the
proof), never counted as the user's surrogate, and never excusing a bug on the same row."""

from __future__ import annotations

import gradscope
from gradscope.evidence.gather import gather
from gradscope.evidence.prepare import prepare
from gradscope.options import Options, Request, from_values
from gradscope.runner.excuses import excuse
from tests.paths import DATA

PADDED = f"{DATA}/padded.py"
IDS = {"ids": "[0,2,3,0,5]"}


def test_a_padding_row_is_torchs_departure_with_its_proof():
    options = from_values({"shape": {"w": "6,3"}, "const": IDS})
    prepared = prepare(Request("check", f"{PADDED}:functional", options))
    facts = excuse(prepared, gather(prepared))["departures"]
    assert facts.departures and set(facts.departed) == {"w"}
    report = gradscope.check(f"{PADDED}:functional", shape={"w": "6,3"}, const=IDS)
    assert report.passed and report.inputs[0].status_counts == {"ok": 15, "surrogate": 3}
    assert not [d for d in report.diagnostics if d.kind == "surrogate_gradient"]  # (torch's)


def test_a_bug_on_a_padded_row_is_never_a_departure():
    report = gradscope.check(f"{PADDED}:ZeroRow", const=IDS)
    assert not report.passed
    assert not [d for d in report.diagnostics if d.kind == "documented_departure"]


def test_nothing_disagreed_nothing_to_undo():
    prepared = prepare(Request("check", "sin(x)", Options(at={"x": "1,2"})))
    assert "departures" not in excuse(prepared, gather(prepared))
