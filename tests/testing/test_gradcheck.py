"""The gradcheck drop-in: torch's signature and semantics, gradscope's checks and
explanations, and the switch that routes a suite's calls through it."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys

import pytest
import torch

import gradscope
from gradscope.testing import gradcheck as dropin
from gradscope.testing import judging
from tests.paths import DATA, ROOT
from tests.testing import leaf

TORCH = sys.modules["torch.autograd.gradcheck"]



class HalfBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g  # half the derivative


def test_signatures_and_defaults_match_torch():
    def shape(fn):  # names, kinds and defaults (annotations are strings on our side)
        return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]

    strict = ("strict", inspect.Parameter.KEYWORD_ONLY, None)  # gradscope's one addition
    assert shape(gradscope.gradcheck) == [*shape(TORCH.gradcheck), strict]
    assert shape(gradscope.gradgradcheck) == [*shape(TORCH.gradgradcheck), strict]
    assert issubclass(gradscope.GradcheckError, TORCH.GradcheckError)
    assert issubclass(gradscope.GradcheckError, RuntimeError)


def test_pass_raise_or_return_false_with_the_explanation():
    x = leaf(3)
    assert gradscope.gradcheck(torch.sin, (x,)) is True
    assert gradscope.gradcheck(torch.sigmoid, x) is True  # one tensor, a builtin
    with pytest.raises(gradscope.GradcheckError) as info:
        gradscope.gradcheck(HalfBackward.apply, (x,))
    assert "0.5 × the derivative" in str(info.value) and info.value.report is not None
    assert gradscope.gradcheck(HalfBackward.apply, (x,), raise_exception=False) is False


def test_only_floating_tensors_that_require_grad_are_checked_and_nothing_is_cast():
    x, seen = leaf(2, 3), []

    def pick(x, index, scale, mask):
        seen.append((index.dtype, mask.dtype, scale))
        return x[:, index] * scale + mask.sum()

    index = torch.tensor([0, 2])
    mask = torch.ones(2, dtype=torch.float32)  # no requires_grad: data, never cast
    assert gradscope.gradcheck(pick, (x, index, 2.5, mask))
    assert set(seen) == {(torch.int64, torch.float32, 2.5)}
    with pytest.raises(ValueError, match="at least one input tensor to require gradient"):
        gradscope.gradcheck(torch.sin, (x.detach(),))


def test_tuple_outputs_and_non_differentiable_ones():
    x, y = leaf(3), leaf(3, seed=1)

    def several(x, y):
        return x.sin() * y, (x * y).sum(), torch.argmax(x), (x > 0)

    assert gradscope.gradcheck(several, (x, y))

    def second_wrong(x):
        return x.sin(), HalfBackward.apply(x)

    with pytest.raises(gradscope.GradcheckError):
        gradscope.gradcheck(second_wrong, (x,))


def test_no_differentiable_output_needs_a_zero_numerical_jacobian():
    x = leaf(4)
    assert gradscope.gradcheck(lambda x: (x > 0).double(), (x,))  # piecewise constant
    with pytest.raises(gradscope.GradcheckError, match="not zero"):
        gradscope.gradcheck(lambda x: x.detach() * 2, (x,))  # a cut path


def test_nan_at_the_inputs_fails():
    with pytest.raises(gradscope.GradcheckError, match="NaN or inf"):
        gradscope.gradcheck(lambda x: torch.log(x - 10), (leaf(3),))


def test_fast_mode_passes_cheaply_and_drills_down_on_disagreement(monkeypatch):
    x = leaf(5)
    calls = []
    monkeypatch.setattr(judging, "full", lambda *a: calls.append(a) or pytest.fail("drilled"))
    assert gradscope.gradcheck(torch.tanh, (x,), fast_mode=True) and not calls
    monkeypatch.undo()
    with pytest.raises(gradscope.GradcheckError) as info:
        gradscope.gradcheck(HalfBackward.apply, (x,), fast_mode=True)
    assert info.value.report is not None  # the per-element report of the drill-down


def test_gradgradcheck():
    x, y = leaf(3), leaf(3, seed=1)
    assert gradscope.gradgradcheck(torch.sin, (x,))
    assert gradscope.gradgradcheck(lambda a, b: (a * b).exp(), (x, y))

    class DetachedBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sin()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x.cos().detach()  # its own derivative w.r.t. x is lost

    assert gradscope.gradcheck(DetachedBackward.apply, (x,))
    assert not gradscope.gradgradcheck(DetachedBackward.apply, (x,), raise_exception=False)
    assert not TORCH.gradgradcheck(DetachedBackward.apply, (x,), raise_exception=False)


def test_nondet_tol_relaxes_the_determinism_check():
    class Jitter(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 3

        @staticmethod
        def backward(ctx, g):
            return g * (3 + 1e-12 * torch.rand_like(g))

    x = leaf(3)
    assert not gradscope.gradcheck(Jitter.apply, (x,), raise_exception=False)
    assert gradscope.gradcheck(Jitter.apply, (x,), nondet_tol=1e-10)






def _pytest(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
         str(DATA / "gradcheck_suite"), *args],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
        env={**os.environ, "CI": "", **(env or {})})


@pytest.mark.slow
def test_pytest_switch_routes_a_suites_calls_and_sums_them_up():
    plain = _pytest()
    assert "4 passed" in plain.stdout, plain.stdout  # torch misses the 0.05 % bug
    # the call's tolerances decide: green under torch stays green, what gradscope's own
    # check finds inside them is a warning in pytest's summary, the relation named
    switched = _pytest("--gradscope").stdout
    assert "4 passed, 1 warning" in switched, switched
    assert "GradscopeWarning" in switched and "0.9995 × the derivative" in switched
    assert "1 passed as torch's gradcheck judges them with a disagreement" in switched
    out = _pytest("--gradscope", "--gradscope-strict").stdout
    assert "1 failed, 3 passed" in out, out
    assert "0.9995 × the derivative" in out
    assert ("4 gradcheck call(s) in 4 test(s) routed through gradscope: 3 passed, 1 failed "
            "with an explanation (failing 1 test(s))") in out  # tests, as pytest counts them
    # pytest-grade: the test's own line, never gradscope's frames or its call objects
    assert "def _backward" not in out and "GradcheckCall(" not in out
    assert "called as gradcheck(eps=1e-06, atol=1e-05, rtol=0.001); strict" in out
    assert "--surrogate" not in out and "@gradscope.surrogate marker" in out
    by_env = _pytest(env={"GRADSCOPE_GRADCHECK": "1", "GRADSCOPE_STRICT": "1"})
    assert "1 failed, 3 passed" in by_env.stdout
    by_ini = _pytest("--gradscope", "-o", "gradscope_strict=true")
    assert "1 failed, 3 passed" in by_ini.stdout


def _parity_calls():
    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    nan = torch.tensor([1.0, float("nan"), 2.0], dtype=torch.float64, requires_grad=True)
    empty = torch.zeros(0, dtype=torch.float64, requires_grad=True)
    sparse = torch.randn(3, 3, dtype=torch.float64).to_sparse().requires_grad_()
    return [
        ("zero-element input", lambda t: t * 2, (empty,), {}),
        ("zero-element input, fast", lambda t: t * 2, (empty,), {"fast_mode": True}),
        ("random func", lambda t: t * torch.rand(3, dtype=torch.float64), (x,), {}),
        ("NaN input", lambda t: t * 2, (nan,), {}),
        ("nondet_tol=inf", lambda t: t * 2, (x,), {"nondet_tol": float("inf")}),
        ("sparse input", lambda t: t.to_dense() * 2, (sparse,), {"masked": True}),
        ("empty output", lambda t: t[:0], (x,), {}),
    ]


@pytest.mark.parametrize("name, func, inputs, kw", _parity_calls(),
                         ids=[c[0] for c in _parity_calls()])
def test_a_call_gradscope_cannot_check_gets_torchs_answer_never_an_error(name, func, inputs, kw):
    expected = dropin.TORCH_GRADCHECK(func, inputs, raise_exception=False, **kw)
    assert gradscope.gradcheck(func, inputs, raise_exception=False, **kw) == expected


def test_what_torch_decided_is_counted_apart_with_why():
    from gradscope.testing.switch import summary

    before = dropin.STATS.delegated
    sparse = torch.randn(3, 3, dtype=torch.float64).to_sparse().requires_grad_()
    assert gradscope.gradcheck(lambda t: t.to_dense() * 2, (sparse,), masked=True)
    assert dropin.STATS.delegated == before + 1
    assert "decided by torch's own gradcheck" in summary() and "sparse" in summary()


def test_the_users_own_exception_comes_through_as_in_torch():
    def boom(t):
        raise KeyError("mine")

    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    with pytest.raises(KeyError, match="mine"):
        gradscope.gradcheck(boom, (x,))


def test_xdist_workers_counts_reach_the_controllers_summary():
    from gradscope.testing import plugin
    from gradscope.testing.stats import STATS, DropInStats

    saved = DropInStats(**vars(STATS))
    node = type("Node", (), {"workeroutput": {"gradscope_drop_in": {
        "passed": 2, "failed": 1, "delegated": 1, "reasons": {"sparse input": 1}}}})()
    try:
        plugin.pytest_testnodedown(node, None)
        assert (STATS.passed, STATS.failed, STATS.delegated) == (
            saved.passed + 2, saved.failed + 1, saved.delegated + 1)
    finally:
        STATS.passed, STATS.failed, STATS.delegated = saved.passed, saved.failed, saved.delegated
        STATS.reasons = saved.reasons


def test_a_compiled_function_passes_the_drop_in_compiled_once():
    # AOTAutograd may donate a compiled graph's buffers to its one backward: the drop-in's
    # plumbing checks take each backward on a fresh forward, and nothing of gradscope's
    # changes dynamo's mode (no_grad, a TorchFunctionMode): one graph, as torch's gradcheck
    from torch._dynamo.utils import counters  # (torch's troubleshooting guide reads it)

    def block(x, w1, w2):
        return torch.tanh(x @ w1) @ w2

    torch.compiler.reset()
    counters.clear()
    gen = torch.Generator().manual_seed(0)
    args = tuple(torch.randn(s, dtype=torch.float64, generator=gen, requires_grad=True)
                 for s in ((8, 4), (4, 8), (8, 2)))
    assert dropin.gradcheck(torch.compile(block, backend="aot_eager"), args)
    assert counters["stats"]["unique_graphs"] == 1


def test_a_compiled_function_whose_graph_shows_no_compiled_backward_is_still_called_plainly():
    # the drop-in's own wrapper says what it wraps, so a torch.compile'd func is known as one
    # even where its output's graph holds no compiled backward (a Function dynamo skipped):
    # no watched forward, which dynamo traced into 8 more graphs of gradscope's own code
    from torch._dynamo.utils import counters  # (torch's troubleshooting guide reads it)

    from tests.data import compiled

    torch.compiler.reset()
    counters.clear()
    x = torch.randn(5, dtype=torch.float64, generator=torch.Generator().manual_seed(0),
                    requires_grad=True)
    assert dropin.gradcheck(compiled.list_sin_compiled, (x,))
    assert counters["stats"]["unique_graphs"] == 1


def test_a_disputed_pass_says_how_large_the_disagreement_is():
    class SlightlyOff(torch.autograd.Function):  # 1e-4 of the gradient: torch's 1e-3 passes
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sin()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x.cos() * (1 + 1e-4)

    x = leaf(3)
    from gradscope.testing.judging import GradscopeWarning

    with pytest.warns(GradscopeWarning, match=r"largest disagreement 9\.\de-05, 0\.0001 of the "
                                              r"largest gradient entry"):
        assert gradscope.gradcheck(SlightlyOff.apply, (x,))
