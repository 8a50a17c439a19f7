"""The drop-in against torch's gradcheck on calls shaped like real libraries' gradcheck tests
(vision ops with tuple outputs, CNN descriptors, attention, normalisation, custom Functions,
index inputs), each in slow and fast mode, in one process, plus the same calls with a 0.1 %
backward error injected. Prints one JSON row per call and a summary line:

    python benchmarks/gradcheck_suite.py [--threads 1] [--repeat 3]

Outcomes are asserted by the tests (tests/e2e/test_benchmarks.py); timings never are."""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
import warnings
from collections.abc import Callable
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F

import gradscope
from gradscope.testing.judging import GradscopeWarning

TORCH_GRADCHECK = sys.modules["torch.autograd.gradcheck"].gradcheck


def _t(*shape: int, seed: int = 0, grad: bool = True) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen, dtype=torch.float64).requires_grad_(grad)


class Off(torch.autograd.Function):
    """Wraps a function with a backward that is off by 0.1 % (the injected bug)."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return g * 1.001


def _histogram(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A soft histogram and its normalised form: a tuple of two outputs."""
    centers = torch.linspace(-2, 2, 5, dtype=x.dtype)
    weights = torch.exp(-((x.reshape(-1, 1) - centers) ** 2) / 0.5)
    hist = weights.sum(0)
    return hist, hist / hist.sum()


def _pyramid(img: torch.Tensor) -> list[torch.Tensor]:
    return [img, F.avg_pool2d(img, 2), F.avg_pool2d(img, 4)]


def _descriptor(img: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    """A HardNet-like descriptor: two convolutions, a norm, L2-normalised."""
    h = F.relu(F.conv2d(img, w1, padding=1))
    h = F.conv2d(h, w2, stride=2)
    return F.normalize(h.flatten(1), dim=1)


def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return torch.softmax(q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5, -1) @ v


def _gather(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    return torch.gather(x, 1, index).sin()


def cases() -> list[tuple[str, Callable[..., Any], tuple[Any, ...]]]:
    index = torch.tensor([[0, 2], [1, 1], [3, 0]])
    return [
        ("histogram (tuple)", _histogram, (_t(20),)),
        ("pyramid (list)", _pyramid, (_t(1, 1, 8, 8),)),
        ("descriptor (CNN)", _descriptor, (_t(1, 1, 8, 8), _t(4, 1, 3, 3, seed=1),
                                           _t(4, 4, 3, 3, seed=2))),
        ("attention", _attention, (_t(2, 4, 8), _t(2, 4, 8, seed=1), _t(2, 4, 8, seed=2))),
        ("layer_norm", lambda x, w, b: F.layer_norm(x, (6,), w, b),
         (_t(3, 6), _t(6, seed=1), _t(6, seed=2))),
        ("gather (int64 index)", _gather, (_t(3, 4), index)),
        ("conv1d", lambda x, w: F.conv1d(x, w, padding=2), (_t(2, 3, 16), _t(4, 3, 5, seed=1))),
    ]


def _timed(fn: Callable[[], bool], repeat: int) -> tuple[bool | str, float]:
    best, result = float("inf"), None
    for _ in range(repeat):
        tic = time.perf_counter()
        try:
            result = fn()
        except Exception as exc:  # a failed check is an outcome, not an error of the harness
            result = type(exc).__name__
        best = min(best, time.perf_counter() - tic)
    return result, best


def _named(call: tuple[Any, Any], fast: bool, repeat: int,
           **kw: Any) -> tuple[bool | str, bool, float]:
    """gradscope's verdict, whether it named a disagreement (failed, or passed within the
    call's tolerances with a GradscopeWarning), and its best time (`kw`: the call's own
    gradcheck arguments)."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", GradscopeWarning)
        ours, t_ours = _timed(partial(gradscope.gradcheck, *call, fast_mode=fast,
                                      raise_exception=False, **kw), repeat)
    warned = any(issubclass(w.category, GradscopeWarning) for w in seen)
    return ours, ours is not True or warned, t_ours


def _injected(fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapped(x, *rest):
        return fn(Off.apply(x), *rest)
    return wrapped


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    totals = {"torch_s": 0.0, "gradscope_s": 0.0}
    agree = caught = missed_by_torch = 0
    rows = 0
    for name, fn, inputs in cases():
        for bug in (False, True):
            target = _injected(fn) if bug else fn
            for fast in (False, True):
                call = (target, inputs)
                theirs, t_torch = _timed(partial(TORCH_GRADCHECK, *call, fast_mode=fast,
                                                 raise_exception=False), args.repeat)
                ours, named, t_ours = _named(call, fast, args.repeat)
                totals["torch_s"] += t_torch
                totals["gradscope_s"] += t_ours
                rows += 1
                agree += theirs == ours
                caught += bug and named
                missed_by_torch += bug and theirs is True and named
                print(json.dumps({"case": name, "bug": bug, "fast_mode": fast,
                                  "torch": theirs, "gradscope": ours, "named": named,
                                  "torch_s": round(t_torch, 5),
                                  "gradscope_s": round(t_ours, 5),
                                  "ratio": round(t_ours / t_torch, 2)}))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"summary": True, "calls": rows, "same_outcome": agree,
                      "bugs_caught_by_gradscope": caught,
                      "bugs_missed_by_torch_caught_by_gradscope": missed_by_torch,
                      "torch_s": round(totals["torch_s"], 4),
                      "gradscope_s": round(totals["gradscope_s"], 4),
                      "ratio": round(totals["gradscope_s"] / totals["torch_s"], 2),
                      "peak_rss_mb": round(peak, 1)}))


if __name__ == "__main__":
    main()
