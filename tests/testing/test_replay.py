"""torch's fast-mode comparison replayed: its vectors are torch's, its verdict is torch's where
it speaks (a pass with margin), near the bound and on anything unusual it says nothing (torch
is asked), and it decides only after it agreed with torch's own gradcheck once."""

from __future__ import annotations

import sys
import warnings

import pytest
import torch

import gradscope
from gradscope.testing import judging, replay
from gradscope.testing.call import GradcheckCall
from tests.testing import leaf


def _scaled(factor: float):
    class Scaled(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return x.sin()

        @staticmethod
        def backward(ctx, g):
            return g * ctx.cos * factor

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.cos = inputs[0].cos()

    return Scaled.apply


KW = {"eps": 1e-6, "atol": 1e-5, "rtol": 1e-3, "nondet_tol": 0.0, "masked": None}


def _call(func, *args) -> GradcheckCall:
    return GradcheckCall.of(func, args)


def test_its_vectors_are_torchs():
    # (torch.autograd.gradcheck, the attribute, is the function: the module is sys.modules')
    make = getattr(sys.modules["torch.autograd.gradcheck"], "_make_vectors", None)
    if make is None:  # (torch's private helper, read only to check the replay against it)
        pytest.skip("torch.autograd.gradcheck._make_vectors is gone")
    x, y = leaf(3, 4), leaf(5, seed=1)
    outs = [torch.zeros(2, 3, dtype=torch.float64), torch.zeros(7, dtype=torch.float64)]
    all_v, all_u, _ = make([x, y], outs, use_forward_ad=False)
    gen = torch.Generator()
    ours = [replay._vector(t, gen) for t in (x, y, *outs)]
    for theirs, mine in zip((*all_u, *all_v), ours, strict=True):
        assert torch.equal(theirs, mine)


@pytest.mark.parametrize("factor, torch_verdict", [(1.0, True), (1 + 1e-7, True),
                                                   (1.5, False), (0.9, False)])
def test_its_verdict_is_torchs_where_it_speaks(factor, torch_verdict):
    x = leaf(6, 5)
    func = _scaled(factor)
    theirs = torch.autograd.gradcheck(func, (x,), fast_mode=True, raise_exception=False)
    assert theirs is torch_verdict
    assert replay.passes(_call(func, x), KW) is torch_verdict


def test_near_the_bound_it_says_nothing():
    # backwards off by growing factors: the replay never passes what torch fails, passes
    # what lies well inside torch's bound, and asks torch about what lies near it
    x = leaf(6, 5)
    seen = set()
    for k in range(40):
        func = _scaled(1 + k * 5e-5)
        theirs = torch.autograd.gradcheck(func, (x,), fast_mode=True, raise_exception=False)
        ours = replay.passes(_call(func, x), KW)
        assert theirs or not ours, k
        seen.add((theirs, ours))
    assert seen == {(True, True), (True, False), (False, False)}


def test_nondeterminism_beyond_nondet_tol_is_torchs():
    x = leaf(4, 4)

    class Noisy(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            return g * (1 + 1e-9 * torch.rand(()).item())

    assert not replay.passes(_call(Noisy.apply, x), KW)
    assert replay.passes(_call(Noisy.apply, x), {**KW, "nondet_tol": 1e-6})


def test_it_decides_only_after_it_agreed_with_torch(monkeypatch):
    monkeypatch.setattr(replay, "PROOF", replay._Proof())
    x, call, asked = leaf(5, 5), None, []
    call = _call(_scaled(1.0), x)

    def torch_says(answer: bool):
        def asked_torch() -> bool:
            asked.append(answer)
            return answer
        return asked_torch

    assert not replay.torch_passes(call, KW, torch_says(False))  # torch decides, disproves
    assert replay.PROOF.agreed is False and asked == [False]
    assert replay.torch_passes(call, KW, torch_says(True)) and asked == [False, True]
    monkeypatch.setattr(replay, "PROOF", replay._Proof())
    assert replay.torch_passes(call, KW, torch_says(True))  # proven here
    assert replay.torch_passes(call, KW, torch_says(False))  # and now it decides
    assert asked == [False, True, True]


def _detached_mean(x):
    # a centring whose mean is detached (kornia's HardNet detaches its statistics): autograd
    # is not the derivative, by 0.005/numel per Jacobian entry — inside torch's tolerance,
    # outside gradscope's
    return (x - x.mean().detach()) * 0.005


def test_past_the_budget_a_call_passes_as_torch_judges_it_said(monkeypatch):
    monkeypatch.setattr(replay, "PROOF", replay._Proof())
    monkeypatch.setattr(judging, "DRILL_BUDGET_S", 1e-4)  # (every element costs too much)
    asked = []
    accepts = judging._torch_accepts

    def counted(kw):
        asked.append(True)
        return accepts(kw)

    monkeypatch.setattr(judging, "_torch_accepts", counted)
    x = leaf(16, 16, 16)
    assert torch.autograd.gradcheck(_detached_mean, (x,), fast_mode=True)
    for _ in range(2):
        with pytest.warns(gradscope.GradscopeWarning, match="projection vᵀJu"):
            assert gradscope.gradcheck(_detached_mean, (x,), fast_mode=True)
    assert len(asked) == 1  # the first call proved the replay; the second it decided


def test_past_the_budget_what_torch_fails_still_fails(monkeypatch):
    monkeypatch.setattr(replay, "PROOF", replay._Proof(agreed=True))
    monkeypatch.setattr(judging, "DRILL_BUDGET_S", 1e-4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(gradscope.GradcheckError, match=r"1\.5"):
            gradscope.gradcheck(_scaled(1.5), (leaf(8, 16, 16),), fast_mode=True)


def test_what_it_cannot_replay_is_torchs(monkeypatch):
    # a view into a larger storage, `masked`, an empty input: the replay does not fit and
    # torch's own gradcheck decides (asked, and its answer taken), even once proven
    monkeypatch.setattr(replay, "PROOF", replay._Proof(agreed=True))
    right = _scaled(1.0)
    base = leaf(6, 8)
    for call, kw in ((_call(right, base[:, 2:5]), KW), (_call(right, leaf(4, 4)),
                                                        {**KW, "masked": True}),
                     (_call(lambda x, e: right(x) + e.sum(), leaf(3),
                            torch.zeros(0, dtype=torch.float64, requires_grad=True)), KW)):
        asked: list[bool] = []

        def torch_says(asked: list[bool] = asked) -> bool:
            asked.append(True)
            return True

        assert not replay.passes(call, kw)
        assert replay.torch_passes(call, kw, torch_says) and asked == [True]
