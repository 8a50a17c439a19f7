"""The excuses stage: each feature's facts under its name, in `FEATURES` order, timed; a
feature with nothing to say has no entry, and one that raises is set aside with why."""

from __future__ import annotations

from gradscope import features
from gradscope.evidence.gather import gather
from gradscope.evidence.prepare import prepare
from gradscope.features import Feature, surrogates
from gradscope.options import Options, Request
from gradscope.runner.excuses import Excuses, excuse
from tests.paths import DATA


def _excuses(command: str, target: str, **options) -> Excuses:
    prepared = prepare(Request(command, target, Options(**options)))
    return excuse(prepared, gather(prepared))


def test_facts_are_kept_by_feature_name_in_order_and_timed():
    found = _excuses("check", f"{DATA}/backwards.py:BlindSquare", at={"x": "1,2"})
    order = [f.name for f in features.FEATURES]
    assert list(found) == sorted(found, key=order.index)
    assert {"backward checks", "surrogates"} <= set(found) and found.aside == {}
    assert set(found.timings) == set(found) and found["surrogates"] is found.facts["surrogates"]


class _Reads(Feature):
    """Reads the facts gathered before it, and steps aside when there are none."""

    name = "reads"

    def facts(self, ctx):
        if ctx.of(surrogates.FEATURE) is None:
            raise features.StepAside("no surrogates facts")
        return sorted(ctx.facts)


def test_a_feature_reads_the_facts_before_it_and_one_that_does_not_fit_steps_aside(
        monkeypatch):
    registered = features.FEATURES
    monkeypatch.setattr(features, "FEATURES", (*registered, _Reads()))
    found = _excuses("jvp", "x * 2", at={"x": "1"})
    assert "surrogates" in found["reads"]
    monkeypatch.setattr(features, "FEATURES", (_Reads(), *registered))
    found = _excuses("jvp", "x * 2", at={"x": "1"})
    assert "reads" not in found and found.aside == {"reads": "no surrogates facts"}
