"""Projections pointed at by a culprit: at scale, where no element is sampled and the
projections over every tensor cannot see an error of a sliver of the norm, the target's
gradient projected over the tensors a wrong Function received is the target's own evidence
that fails the run — never where the Function is right, and never below scale."""

from __future__ import annotations

import pytest
import torch

import gradscope
from gradscope.engines.fd import budget
from gradscope.features.inplace import pointed
from gradscope.features.inplace.calls import FunctionCall, storage
from gradscope.features.inplace.culprits import ClassCheck, Wrong
from gradscope.report.status import Status
from tests.paths import DATA

POINTED = str(DATA / "pointed.py")
AT_SCALE = {"shape": {"x": (4, 256)}, "sample": 1, "max_fd": 8}


@pytest.fixture
def nothing_sampled(monkeypatch):
    # a 10⁹-parameter model's flop budget samples no element: the same here, at 66,817
    monkeypatch.setattr(budget, "MAX_SAMPLE_FLOPS", 0)


def _rows(report):
    return [c for c in report.upstream_checks if "over the tensors" in c.label]


def test_a_wrong_function_on_a_sliver_of_the_norm_fails_by_its_pointed_projections(
        nothing_sampled, monkeypatch):
    report = gradscope.check(f"{POINTED}:off_loss", **AT_SCALE)
    assert not report.passed
    rows = _rows(report)
    assert rows and all(not r.passed for r in rows)
    assert "receives as s (off.s)" in rows[0].label
    culprit = next(d for d in report.diagnostics if d.kind == "culprit")
    assert "ScaleOff.backward (pointed.py:" in culprit.message
    assert report["off.s"].status == Status.MISMATCH
    # without them every projection over all tensors agrees; the departure still fails the
    # run, as what the target's gradient moves by with the derivative in its place
    monkeypatch.setattr(pointed, "projected", lambda *a, **k: ())
    blind = gradscope.check(f"{POINTED}:off_loss", **AT_SCALE)
    assert not blind.passed and not _rows(blind)
    assert all(c.passed for c in blind.upstream_checks if c.label.startswith("projection"))
    (moved,) = [c for c in blind.upstream_checks if "replaced by its forward's derivative"
                in c.label]
    assert not moved.passed and "ScaleOff.backward" in moved.label and "off.s (1)" in moved.label
    assert blind["off.s"].status == Status.MISMATCH
    culprit = next(d for d in blind.diagnostics if d.kind == "culprit")
    assert "target's gradient moves beyond its tolerance at 1 element(s)" in culprit.message


def test_a_right_function_gets_no_pointed_projection(nothing_sampled):
    report = gradscope.check(f"{POINTED}:right_loss", **AT_SCALE)
    assert report.passed and not _rows(report)


@pytest.mark.slow
def test_below_scale_every_element_judges_and_nothing_is_pointed():
    report = gradscope.check(f"{POINTED}:off_loss", shape={"x": (2, 256)})
    assert not report.passed and not _rows(report)


def test_suspects_are_the_targets_own_tensors_by_storage():
    weight, other = torch.ones(4), torch.ones(4)
    x = torch.randn(2, 4)

    class Norm(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, weight):
            return x * weight

    call = FunctionCall(Norm, (x.clone(), weight.clone()), {}, None,
                        extra={"storage": (storage(x), storage(weight))})
    check = ClassCheck(Norm, 1, 12, (Wrong(call, "weight", None, 4),))
    found = pointed.suspects([check], {"w": weight, "v": other, "x": x})
    assert [(argument, names) for _, argument, names in found] == [("weight", ("w",))]
    # an equal tensor elsewhere is not the one the call received; a nonlinear finding and
    # an argument that is not the target's are never pointed at
    assert pointed.suspects([check], {"v": other}) == []
    nonlinear = ClassCheck(Norm, 1, 12, (Wrong(call, "weight", None, 4, nonlinear=True),))
    assert pointed.suspects([nonlinear], {"w": weight}) == []


def test_the_lean_pass_of_the_drop_in_still_points_at_scale(nothing_sampled):
    # the drop-in checks a call first without what only explains; at scale the in-place
    # finding leads to evidence, so the lean pass runs it and fails as the full one does
    from dataclasses import replace

    from gradscope.api import request, run

    asked = request("check", f"{POINTED}:off_loss", (), dict(AT_SCALE))
    lean = run(replace(asked, explain_passing=False))
    assert not lean.passed and _rows(lean)
