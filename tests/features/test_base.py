"""The rules features are held to: evidence decides (an inner Function's own departure is a
note where the target's gradient agrees), and a feature that raises steps aside with a note,
the verdict what the evidence says without it; a usage error in a feature's own option is still
the user's (exit 2)."""

from __future__ import annotations

import pytest

import gradscope
from gradscope import features
from gradscope.features import Feature
from gradscope.report.headline import headline
from gradscope.report.status import Status
from tests.paths import DATA

DEPARTING = f"{DATA}/symmetric.py"


class Raising(Feature):
    """A feature whose every hook raises."""

    name = "raising"

    def facts(self, ctx):
        raise RuntimeError("boom\nsecond line")


class RaisingLater(Feature):
    """Facts fine; its excuse and its diagnosis raise."""

    name = "raising later"

    def facts(self, ctx):
        return True

    def explain(self, ctx, name, view, cmp):
        raise ValueError("no excuse today")


def _with(monkeypatch, feature):
    monkeypatch.setattr(features, "FEATURES", (feature, *features.FEATURES))


@pytest.mark.parametrize("feature", [Raising(), RaisingLater()])
def test_a_feature_that_raises_steps_aside_and_the_verdict_is_unchanged(monkeypatch, feature):
    plain = gradscope.check(f"{DATA}/corpus.py:SignFlip", x="0.2,1.7")
    good = gradscope.check("sin(x) * y", x="0.5,1", y="2,3")
    _with(monkeypatch, feature)
    wrong = gradscope.check(f"{DATA}/corpus.py:SignFlip", x="0.2,1.7")
    right = gradscope.check("sin(x) * y", x="0.5,1", y="2,3")
    assert not wrong.passed and right.passed
    assert [i.status for i in wrong.inputs] == [i.status for i in plain.inputs]
    assert [i.status for i in right.inputs] == [i.status for i in good.inputs]
    note = next(n for n in right.notes if n.startswith(f"{feature.name} stepped aside"))
    assert "Error: " in note and "second line" not in note


def test_a_usage_error_in_a_features_option_is_still_the_users():
    with pytest.raises(gradscope.UsageError, match="not an input of the target"):
        gradscope.check("round(x)", x="0.2,1.7", surrogate="x=hardtanh(q)")


def test_an_inner_departure_the_target_does_not_see_is_a_note_not_a_failure():
    report = gradscope.check(f"{DEPARTING}:symmetric_spectrum", at={"m": "randn(4,4)"})
    assert report.passed and all(i.status == Status.OK for i in report.inputs)
    (check,) = [c for c in report.upstream_checks if "checked in place" in c.label]
    assert check.passed and check.result == Status.MISMATCH and "a note" in check.label
    (note,) = [d for d in report.diagnostics if d.kind == "inner_departure"]
    assert note.op.startswith("SymmetricEigenvalues.backward (symmetric.py:")
    assert "a note, not a failure" in note.message and "0.5 × the derivative" in note.message
    # its proof: the derivative in place of its backward moves the target by nothing
    assert "with that derivative in its place the target's gradient moves by at most" in \
        note.message
    strict = gradscope.check(f"{DEPARTING}:symmetric_spectrum", at={"m": "randn(4,4)"},
                             fail_on="warning")
    assert not strict.passed and "inner_departure" in strict.failures[-1].detail


def test_the_same_departure_where_the_target_is_wrong_is_its_culprit():
    report = gradscope.check(f"{DEPARTING}:lower_spectrum", at={"m": "randn(4,4)"})
    assert not report.passed
    (culprit,) = [d for d in report.diagnostics if d.kind == "culprit"]
    assert culprit.op.startswith("SymmetricEigenvalues.backward (symmetric.py:")
    (check,) = [c for c in report.upstream_checks if "checked in place" in c.label]
    assert not check.passed and check.result == Status.MISMATCH
    assert headline(report).startswith("SymmetricEigenvalues.backward")
