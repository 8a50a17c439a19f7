"""--compile's evidence: the compiled target called once, every view's question answered by
backward through that one call, and what dynamo did counted by a wrapping backend."""

from __future__ import annotations

import pytest
import torch

from gradscope.errors import TargetError, UsageError
from gradscope.evidence.gather import gather
from gradscope.options import Options, Request
from gradscope.runner import prepare
from gradscope.targets.compiled import backend_of, compiled_run
from tests.paths import DATA

COMPILED = str(DATA / "compiled.py")


def _prepared(target: str, **options):
    return prepare(Request("check", target, Options(**options)))


def test_an_unknown_backend_is_a_usage_error_naming_the_known_ones():
    with pytest.raises(UsageError, match=r"no torch.compile backend 'nope'; known: .*inductor"):
        backend_of("nope")
    with pytest.raises(UsageError, match="--compile"):
        _prepared("x * 2", compile="nope")


def test_order_two_and_nproc_are_refused_with_compile():
    with pytest.raises(UsageError, match="--order 2"):
        _prepared("x * 2", compile="eager", order=2)
    with pytest.raises(UsageError, match="--nproc"):
        _prepared(f"{COMPILED}:smooth", compile="eager", nproc=2)


def test_every_question_is_answered_through_one_compiled_call():
    prepared = _prepared(f"{COMPILED}:smooth", shape={"x": (4,)})
    v = torch.tensor([1.0, -2.0, 0.5, 3.0], dtype=torch.float64)
    done = compiled_run(prepared.target, prepared.bound.cast, "aot_eager",
                        {"table": v, "jac": None})
    x = prepared.bound.cast["x"]
    want = torch.func.vjp(lambda t: torch.tanh(t) * t.sin(), x)[1](v)[0]
    assert torch.allclose(done.answers["table"]["x"], want)
    assert done.answers["jac"]["x"].shape == (4, 4)
    assert torch.allclose(done.answers["jac"]["x"] @ torch.ones(4, dtype=torch.float64) * 0
                          + done.answers["jac"]["x"].T @ v, want)
    assert done.differentiable and done.stats.graphs == 1 and not done.stats.fell_back
    assert done.stats.recompiles == 0 and done.stats.graph_breaks == 0


def test_graph_breaks_are_counted_with_dynamos_reason():
    prepared = _prepared(f"{COMPILED}:chatty", shape={"x": (3,)})
    done = compiled_run(prepared.target, prepared.bound.cast, "eager", {})
    assert done.stats.graph_breaks == 1 and done.stats.graphs == 2
    assert "print" in done.stats.breaks[0] or "builtin" in done.stats.breaks[0]


def test_a_module_is_compiled_whole_its_parameters_given_by_name():
    prepared = _prepared(f"{COMPILED}:Block", shape={"x": (2, 3)})
    v = torch.ones(2, 2, dtype=torch.float64)
    done = compiled_run(prepared.target, prepared.bound.cast, "aot_eager", {"t": v})
    evidence = gather(prepared)
    for name, grad in evidence.backward.grads.items():
        assert torch.allclose(done.answers["t"][name], grad), name


def test_a_backend_that_fails_is_the_targets_error():
    prepared = _prepared(f"{COMPILED}:smooth", shape={"x": (3,)},
                         compile="failing_backend")
    with pytest.raises(TargetError, match="failing_backend"):
        gather(prepared)
