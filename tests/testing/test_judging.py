"""The drop-in's judgement: the call's tolerances decide (torch's defaults where left), what
gradscope's own tighter check finds inside them is a GradscopeWarning naming the relation, and
strict mode makes it a failure. Tolerance excuses precision only: NaN, kinks and surrogate
gradients fail whatever the tolerances."""

from __future__ import annotations

import time
import warnings

import pytest
import torch

import gradscope
from gradscope.testing import judging
from gradscope.testing.judging import GradscopeWarning
from tests.data.branches import RoundSTE  # undeclared: a straight-through round
from tests.testing import leaf


def _scaled(factor: float):
    class Scaled(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2 * factor

    return Scaled.apply


def test_inside_the_calls_tolerance_passes_with_the_relation_named():
    fn = _scaled(1.0005)  # 0.05 %: inside torch's rtol 1e-3, outside gradscope's 1e-6
    for fast in (False, True):
        with pytest.warns(GradscopeWarning, match=r"1\.0005 × the derivative") as caught:
            assert gradscope.gradcheck(fn, (leaf(4),), fast_mode=fast)
        text = str(caught[0].message)
        assert "atol=1e-05, rtol=0.001" in text and "strict=True" in text
        assert caught[0].filename == __file__  # the warning points at the caller's line


def test_strict_mode_fails_it():
    fn = _scaled(1.0005)
    with pytest.raises(gradscope.GradcheckError, match="strict: judged with gradscope's own"):
        gradscope.gradcheck(fn, (leaf(4),), strict=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(judging.STRICT_ENV, "1")
        assert not gradscope.gradcheck(fn, (leaf(4),), raise_exception=False)
        with pytest.warns(GradscopeWarning):  # the call's own word wins
            assert gradscope.gradcheck(fn, (leaf(4),), strict=False)
    judging.Settings.strict = True
    try:
        assert not gradscope.gradcheck(fn, (leaf(4),), raise_exception=False)
    finally:
        judging.Settings.strict = False


def test_outside_the_calls_tolerance_fails_judged_by_it():
    with pytest.raises(gradscope.GradcheckError) as info:
        gradscope.gradcheck(_scaled(1.01), (leaf(4),))
    assert "fails at these tolerances" in str(info.value)
    assert "1.01 × the derivative" in str(info.value)
    # a looser tolerance the caller chose accepts it, with the warning
    with pytest.warns(GradscopeWarning):
        assert gradscope.gradcheck(_scaled(1.01), (leaf(4),), rtol=0.05)


def test_a_tighter_tolerance_than_gradscopes_own_is_the_callers():
    fn = _scaled(1 + 1e-8)  # inside gradscope's float64 rtol 1e-6
    with warnings.catch_warnings():
        warnings.simplefilter("error", GradscopeWarning)
        assert gradscope.gradcheck(fn, (leaf(4),))
    assert not gradscope.gradcheck(fn, (leaf(4),), rtol=1e-10, atol=1e-12,
                                   raise_exception=False)


def test_correct_gradients_pass_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error", GradscopeWarning)
        assert gradscope.gradcheck(torch.tanh, (leaf(5),))
        assert gradscope.gradcheck(torch.tanh, (leaf(5),), fast_mode=True)


def test_tolerance_never_excuses_what_is_not_precision():
    x = leaf(4)
    with pytest.raises(gradscope.GradcheckError, match="NaN or inf"):
        gradscope.gradcheck(lambda t: torch.log(t - 10), (x,), atol=1e3, rtol=1.0)
    with pytest.raises(gradscope.GradcheckError, match="not a matter of precision"):
        gradscope.gradcheck(RoundSTE.apply, (x * 3,), atol=0.5)
    kink = torch.tensor([0.0, 1.0], dtype=torch.float64, requires_grad=True)
    assert not gradscope.gradcheck(torch.relu, (kink,), rtol=0.5, raise_exception=False)


def test_the_warning_class_is_public():
    assert gradscope.GradscopeWarning is GradscopeWarning and issubclass(GradscopeWarning,
                                                                         UserWarning)
    assert "GradscopeWarning" in dir(gradscope)


def test_options_tight_and_loose():
    call = gradscope.testing.call.GradcheckCall.of(torch.sin, (leaf(3),))
    kw = {"eps": 1e-6, "atol": 1e-5, "rtol": 1e-3, "nondet_tol": 0.0}
    tight, loose = judging.options(call, kw, tight=True), judging.options(call, kw, tight=False)
    assert "atol" not in tight and "rtol" not in tight  # gradscope's own for float64
    assert (loose["atol"], loose["rtol"], loose["eps"]) == (1e-5, 1e-3, 1e-6)
    stricter = judging.options(call, {**kw, "atol": 1e-12, "eps": 1e-4}, tight=True)
    assert stricter["atol"] == 1e-12 and "rtol" not in stricter and stricter["eps"] == 1e-4


def test_fast_mode_projects_each_input_alone_where_all_at_once_jumps(monkeypatch):
    # the label y requires grad but the loss jumps off ±1: moving every input at once
    # moves y too; each input alone (as torch's fast mode takes them) decides without the
    # per-element drill-down
    x1, x2 = leaf(5, 5), leaf(5, 5, seed=1)
    y = torch.tensor([1.0, -1.0, 1.0, -1.0, -1.0], dtype=torch.float64, requires_grad=True)

    def loss(a, b, label):
        return torch.nn.functional.cosine_embedding_loss(a, b, label, reduction="none")

    def no_drill_down(*args):
        raise AssertionError("drilled down")

    monkeypatch.setattr(judging, "full", no_drill_down)
    assert gradscope.gradcheck(loss, (x1, x2, y), fast_mode=True)
    wrong = _scaled(1.01)  # and a wrong input is still one alone
    with pytest.raises(AssertionError, match="drilled down"):
        gradscope.gradcheck(lambda a, label: wrong(a) * label, (x1, y), fast_mode=True)


def test_a_large_image_through_kinks_is_decided_by_its_projection(monkeypatch):
    # every element of a 3x48x48 image moved at once crosses ReLU kinks at the call's step:
    # the projection (at a 100x smaller step) agrees for the right network, no drill-down
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(),
                              torch.nn.Conv2d(4, 2, 3, padding=1)).double()
    img = torch.randn(1, 3, 48, 48, dtype=torch.float64, requires_grad=True)
    seen = []
    projected = judging._fast_agrees

    def recorded(*args, **kwargs):
        seen.append(projected(*args, **kwargs).agrees)
        return judging.Fast(seen[-1])

    monkeypatch.setattr(judging, "_fast_agrees", recorded)
    assert gradscope.gradcheck(net, (img,), fast_mode=True) and seen == [True]


def test_never_a_pass_of_what_torchs_gradcheck_fails_at_the_calls_tolerances():
    from tests.data import float_out

    for seed in range(6):
        x = torch.randn(6, dtype=torch.float64, generator=torch.Generator().manual_seed(seed),
                        requires_grad=True)
        assert not torch.autograd.gradcheck(float_out.ends_float_bug, (x,),
                                            raise_exception=False)
        assert not gradscope.gradcheck(float_out.ends_float_bug, (x,), raise_exception=False)


def test_a_passing_call_skips_what_only_explains_and_a_failing_one_keeps_it():
    # an inner Function departing where the call's gradient is right is a note nobody sees:
    # the drop-in's passing call does not check it in place (torch's cost); a wrong one is
    # still named, the check in place running where the comparisons find the mismatch
    from gradscope.testing.call import GradcheckCall
    from tests.data import symmetric

    m = leaf(4, 4, seed=1)
    tight = {"dtype": "float64", "fail_on": "mismatch", "nondet_tol": 0.0, "device": "cpu"}
    passing = judging.full(GradcheckCall.of(symmetric.symmetric_spectrum, (m,)), tight)
    assert passing.passed and not any("in place" in c.label for c in passing.upstream_checks)
    shown = gradscope.check(symmetric.symmetric_spectrum, m.detach())
    assert passing.timings["calls.total"] < shown.timings["calls.total"]
    failing = judging.full(GradcheckCall.of(symmetric.lower_spectrum, (m,)), tight)
    (culprit,) = [d for d in failing.diagnostics if d.kind == "culprit"]
    assert culprit.op.startswith("SymmetricEigenvalues.backward (symmetric.py:")


def _log_partition(scores):
    # an exact log-partition: every sequence of labels enumerated, as small exact tests do
    import itertools

    n, k = scores.shape
    seqs = torch.tensor(list(itertools.product(range(k), repeat=n)))
    return torch.logsumexp(scores[torch.arange(n), seqs].sum(-1), 0)


def _off_in_the_last_element(relative: float):
    class Off(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            out = g.clone()
            out.view(-1)[-1] *= 1 + relative
            return out

    return lambda scores: _log_partition(Off.apply(scores))


def test_the_drop_in_compares_every_element_torch_would_whatever_the_budgets(monkeypatch):
    # the work budget caps the columns of a costly evaluation: a check leaves most elements
    # unchecked (and says so), but torch's slow gradcheck compares all, and so does the drop-in
    from gradscope.engines.fd import budget

    monkeypatch.setattr(budget, "MAX_DENSE_WORK", 1e5)
    x = torch.randn(4, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    sampled = gradscope.check(_log_partition, x)
    assert sum(i.checked for i in sampled.inputs) < x.numel()
    assert any("finite differences estimated" in n for n in sampled.notes)
    seen = []
    real = judging.full
    monkeypatch.setattr(judging, "full", lambda *a, **k: seen.append(real(*a, **k)) or seen[-1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert gradscope.gradcheck(_log_partition, (x.clone().requires_grad_(),), fast_mode=False)
    assert seen and all(sum(i.checked for i in r.inputs) == x.numel() for r in seen)
    # a 1 % slip in the one element no sample reached is caught, as torch's gradcheck does
    with pytest.raises(gradscope.GradcheckError):
        gradscope.gradcheck(_off_in_the_last_element(1e-2), (x.clone().requires_grad_(),),
                            fast_mode=False)


def test_a_check_memory_cuts_short_is_no_full_pass_torch_decides_the_rest(monkeypatch):
    from gradscope.engines.fd import budget

    monkeypatch.setattr(budget, "MAX_STORED_ENTRIES", 4)  # 4 of 16 columns held
    x = torch.randn(4, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    for strict in (False, True):  # (strict too: what gradscope did not compare, torch decides)
        with pytest.warns(GradscopeWarning, match=r"gradscope compared \d of 16 elements"):
            assert gradscope.gradcheck(_log_partition, (x.clone().requires_grad_(),),
                                       fast_mode=False, strict=strict)
    judged = []
    monkeypatch.setattr(judging, "torch_gradcheck",
                        lambda kw, **changed: judged.append(kw) or False)  # torch fails it
    with pytest.raises(gradscope.GradcheckError, match="torch's gradcheck, which compares"):
        gradscope.gradcheck(_log_partition, (x.clone().requires_grad_(),), fast_mode=False)
    assert judged


def test_a_backward_nonlinear_at_the_calls_tolerance_fails_explained_though_torch_passes():
    # torch's Jacobian columns come from 0/1 upstreams, for which |g|·g = g: it passes; at the
    # call's own tolerance gradscope's random upstreams and the linearity probe still see it
    from tests.data.backwards import SquaredUpstream

    x = torch.randn(6, dtype=torch.float64, generator=torch.Generator().manual_seed(0),
                    requires_grad=True)
    assert torch.autograd.gradcheck(SquaredUpstream.apply, (x,))
    with pytest.raises(gradscope.GradcheckError) as raised:
        gradscope.gradcheck(SquaredUpstream.apply, (x,))
    assert raised.value.report is not None
    kinds = {d.kind for d in raised.value.report.diagnostics}
    assert "nonlinear_backward" in kinds, raised.value.report.to_text()


def test_a_backward_linear_to_the_calls_tolerance_passes_where_torch_passes():
    # a solver stopped at 1e-5: gradscope's own tolerance sees it wrong and not linear, the
    # call's 1e-3 sees neither: a warning where torch passes, a failure in strict mode
    from tests.data.backwards import LooseSolvedSquare, SolvedScaledSquare

    x = torch.randn(200, dtype=torch.float64, generator=torch.Generator().manual_seed(0),
                    requires_grad=True)
    called = {"atol": 1e-3, "rtol": 1e-3}
    assert torch.autograd.gradcheck(LooseSolvedSquare.apply, (x,), **called)
    with pytest.warns(GradscopeWarning, match="passes as torch's gradcheck judges it"):
        assert gradscope.gradcheck(LooseSolvedSquare.apply, (x,), **called)
    with pytest.raises(gradscope.GradcheckError, match="nonlinear backward"):
        gradscope.gradcheck(LooseSolvedSquare.apply, (x,), strict=True, **called)
    with pytest.raises(gradscope.GradcheckError, match=r"0\.5 × the derivative"):
        gradscope.gradcheck(SolvedScaledSquare.apply, (x,), **called)


def test_the_drill_down_is_priced_from_the_fastest_evaluation_not_the_first():
    # the first evaluation pays for warm-up (here 0.3 s, once): priced from it, 100 elements
    # would cost minutes and torch's verdict would stand with the projection said; priced
    # from the fastest, the per-element check runs and says how the backward is wrong
    wrong, cold = _scaled(1.01), []

    def warming(x):
        if not torch.is_grad_enabled() and not cold:
            cold.append(True)
            time.sleep(0.3)
        return wrong(x).sin()

    with pytest.warns(GradscopeWarning, match=r"1\.01 × the derivative at every element"):
        assert gradscope.gradcheck(warming, (leaf(10, 10),), fast_mode=True)
    assert cold


def _projected(func, x, monkeypatch):
    """fast mode's projection of func at x, and the stencils (points) it took."""
    points, along = [], judging._Projection._along

    def counted(self, fd, tangents, n):
        points.append(n)
        return along(self, fd, tangents, n)

    monkeypatch.setattr(judging._Projection, "_along", counted)
    call = judging.GradcheckCall.of(func, (x,))
    kw = {"eps": 1e-6, "atol": 1e-5, "rtol": 1e-3, "nondet_tol": 0.0}
    fast = judging._fast_agrees(call, judging.options(call, kw, tight=True),
                                judging.options(call, kw, tight=False))
    return fast, points


def test_two_steps_that_agree_with_each_other_and_not_with_autograd_disagree(monkeypatch):
    fast, points = _projected(lambda x: _scaled(1.01)(x).sin(), leaf(20, 20), monkeypatch)
    assert fast.agrees is False and points == [2, 2]  # (no four-point stage)


@pytest.mark.parametrize("scale", [3e-6, 3e-7, 3e-8, 1e-6])
def test_a_right_function_whose_steps_cross_kinks_is_never_said_to_disagree(scale, monkeypatch):
    # ReLU at thousands of elements within a few steps of 0: each step crosses its own
    # kinks, so the two steps differ from each other and from autograd (at 3e-6 the smaller
    # step lies farther from autograd than the larger): that proves nothing
    gen = torch.Generator().manual_seed(0)
    x = (torch.randn(4096, generator=gen, dtype=torch.float64) * scale).requires_grad_(True)
    weights = torch.linspace(1, 2, 4096, dtype=torch.float64)
    fast, _ = _projected(lambda x: torch.relu(x) * weights, x, monkeypatch)
    assert fast.agrees is not False
