"""`FEATURES`: every analysis module registered once, in an order that lets each read the facts
and findings it needs (each such dependency spelled out here)."""

from __future__ import annotations

import pkgutil
from importlib import import_module

from gradscope import features
from gradscope.features import FEATURES, Feature


def _order() -> list[str]:
    return [f.name for f in FEATURES]


def test_every_feature_module_is_registered_once():
    modules = {info.name for info in pkgutil.iter_modules(features.__path__)} - {"base"}
    registered = {type(f).__module__.rpartition(".")[2] for f in FEATURES}
    assert registered == modules
    assert len(set(_order())) == len(FEATURES) and all(isinstance(f, Feature) for f in FEATURES)
    for name in modules:
        assert import_module(f"gradscope.features.{name}").FEATURE in FEATURES


def test_the_order_serves_what_each_feature_reads():
    order = _order()
    before = [("backward checks", "surrogates"),  # never excuse a nonlinear backward
              ("projections", "departures"),  # the disagreeing projections are re-run
              ("departures", "surrogates"),  # torch's departure explains first
              ("relations", "in place"), ("relations", "surrogates")]  # they name relations
    for first, then in before:
        assert order.index(first) < order.index(then), (first, then)


def test_only_torchs_departure_is_not_the_users_surrogate():
    assert [f.name for f in FEATURES if not f.users] == ["departures"]
