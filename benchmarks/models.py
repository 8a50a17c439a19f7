"""Whole models: gradscope beside torch's gradcheck (slow and fast mode) on the same model in
one process, and a scaling table. Models are hand-written (tests/data/stack.py: a pre-norm
transformer stack), float32 as users have them; every tool checks a float64 copy.

    python benchmarks/models.py [--threads 2] [--quick] [--no-slow] [--scale]

Rows: the 4-block stack (34,240 parameter elements, input 2×8×32), a 2-layer GPT-2-shaped toy
(embedding width 128), and stacks scaled to about 1e4, 1e5 and 1e6 parameter elements. Prints
one JSON row per (model, tool) and a table; timings are never asserted anywhere."""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "data"))
import stack as models

import gradscope

TORCH_GRADCHECK = sys.modules["torch.autograd.gradcheck"].gradcheck


def _gradcheck(model: torch.nn.Module, x: torch.Tensor, fast: bool) -> tuple[bool, float, int]:
    """torch's gradcheck over the input and every parameter of a float64 copy."""
    m = copy.deepcopy(model).double()
    names = [n for n, _ in m.named_parameters()]
    leaves = [x.double().requires_grad_()] + [p.detach().clone().requires_grad_()
                                              for p in m.parameters()]

    def f(x_: torch.Tensor, *params: torch.Tensor) -> torch.Tensor:
        out = torch.func.functional_call(m, dict(zip(names, params, strict=True)), (x_,))
        return out.pow(2).mean()

    started = time.perf_counter()
    ok = TORCH_GRADCHECK(f, tuple(leaves), fast_mode=fast, raise_exception=False)
    return ok, time.perf_counter() - started, sum(t.numel() for t in leaves)


def _gradscope(model: torch.nn.Module, x: torch.Tensor) -> tuple[bool, float, int, int]:
    def loss(x: torch.Tensor) -> torch.Tensor:
        return model(x).pow(2).mean()

    started = time.perf_counter()
    report = gradscope.check(loss, x=x)
    wall = time.perf_counter() - started
    checked = sum(i.checked for i in report.inputs)
    return report.passed, wall, checked, sum(i.total for i in report.inputs)


def _gpt2_toy() -> torch.nn.Module:
    torch.manual_seed(0)
    return models.Stack(depth=2, dim=128)


def _scaled(dim: int, depth: int) -> torch.nn.Module:
    torch.manual_seed(0)
    return models.Stack(depth=depth, dim=dim)


def rows(args: argparse.Namespace) -> list[dict[str, Any]]:
    cases = [("4-block stack", models.stack, (2, 8, 32), True),
             ("gpt2-shaped toy (2 layers, width 128)", _gpt2_toy(), (1, 8, 128), False)]
    if not args.quick:
        cases += [("stack ~1e4", _scaled(16, 3), (2, 8, 16), False),
                  ("stack ~1e5", _scaled(48, 4), (2, 8, 48), False),
                  ("stack ~1e6", _scaled(160, 4), (1, 8, 160), False)]
    out: list[dict[str, Any]] = []
    for label, model, shape, slow in cases:
        first = len(out)
        x = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
        params = sum(p.numel() for p in model.parameters())
        ok, wall, checked, total = _gradscope(model, x)
        out.append({"model": label, "parameters": params, "tool": "gradscope", "passed": ok,
                    "seconds": round(wall, 2), "elements_checked": checked,
                    "elements": total})
        ok, wall, total = _gradcheck(model, x, fast=True)
        out.append({"model": label, "parameters": params, "tool": "gradcheck fast",
                    "passed": ok, "seconds": round(wall, 2),
                    "elements_checked": "1 random direction per input", "elements": total})
        if slow and not args.no_slow:
            ok, wall, total = _gradcheck(model, x, fast=False)
            out.append({"model": label, "parameters": params, "tool": "gradcheck slow",
                        "passed": ok, "seconds": round(wall, 2), "elements_checked": total,
                        "elements": total})
        for row in out[first:]:
            print(json.dumps(row), flush=True)
    return out


SCALE = [("GPT tiny (2 layers, width 16)", "gpt.py:tiny_loss", "gpt.py:tiny_off_loss",
          "randint(0,97,(2,9))"),
         ("GPT-2 small (124M)", "gpt_small.py:loss", "gpt_small_off.py:loss",
          "randint(0,50257,(1,17))")]


def scale_rows(threads: int) -> list[dict[str, Any]]:
    """Models at scale, passing and failing (a 1 % error planted in the custom GELU), each
    `gradscope check` in its own process: seconds and peak resident memory (getrusage of the
    child), exit code and what the report says it compared."""
    import resource
    import subprocess

    data = Path(__file__).resolve().parent.parent / "tests" / "data"
    out = []
    for label, right, wrong, tokens in SCALE:
        for kind, target in (("passing", right), ("failing", wrong)):
            code = ("import sys, time, resource, torch; torch.set_num_threads(%d); "
                    "from gradscope.cli.main import entry; sys.argv=%r; entry()")
            argv = ["gradscope", "check", str(data / target), "--const", f"tokens={tokens}",
                    "--json"]
            started = time.perf_counter()
            done = subprocess.run([sys.executable, "-c", code % (threads, argv)],
                                  capture_output=True, text=True)
            wall = time.perf_counter() - started
            peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20  # (KB → GB)
            try:
                coverage = json.loads(done.stdout).get("coverage", "")
            except ValueError:
                coverage = done.stderr.strip().splitlines()[-1:] or ""
            row = {"model": label, "run": kind, "exit": done.returncode,
                   "seconds": round(wall, 1), "peak_gb_so_far": round(peak, 2),
                   "coverage": coverage}
            print(json.dumps(row), flush=True)
            out.append(row)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    parser.add_argument("--quick", action="store_true", help="the two named models only")
    parser.add_argument("--no-slow", action="store_true", help="skip gradcheck's slow mode")
    parser.add_argument("--scale", action="store_true",
                        help="models at scale only: GPT tiny and GPT-2 small (124M), passing "
                        "and failing, each in its own process (seconds, peak memory)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.scale:
        scale_rows(args.threads)
        return
    table = rows(args)
    print(f"\n{'model':40} {'tool':15} {'seconds':>8} {'checked':>30}")
    for r in table:
        print(f"{r['model']:40} {r['tool']:15} {r['seconds']:8.2f} "
              f"{r['elements_checked']!s:>30}")


if __name__ == "__main__":
    main()
