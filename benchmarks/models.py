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


# (label, target, failing target, tokens, environment); the Llama rows share one file, whose
# depth and planted bug come from the environment
LLAMA = "llama_1b.py:loss"
SCALE = [("GPT tiny (2 layers, width 16)", "gpt.py:tiny_loss", "gpt.py:tiny_off_loss",
          "randint(0,97,(2,9))", {}),
         ("GPT-2 small (124M)", "gpt_small.py:loss", "gpt_small_off.py:loss",
          "randint(0,50257,(1,17))", {}),
         ("Llama shape, 2 of 18 layers (167M)", LLAMA, LLAMA, "randint(0,32000,(1,17))",
          {"GRADSCOPE_LLAMA_LAYERS": "2"})]
ONE_B = ("Llama shape, 18 layers (1.0B)", LLAMA, LLAMA, "randint(0,32000,(1,17))",
         {"GRADSCOPE_LLAMA_LAYERS": "18"})
# the child: its own peak resident memory and the model's parameter count, printed at exit
CHILD = """
import atexit, gc, json, resource, sys, torch
torch.set_num_threads(%d)
def said():  # (the user's float32 parameters: gradscope's copies are float64)
    # (by storage: gradscope's copy of a module shares its parameters' storage)
    params = {p.data_ptr(): p.numel() for o in gc.get_objects()
              if isinstance(o, torch.nn.Module) for p in o.parameters()
              if p.dtype == torch.float32}
    gpu = torch.cuda.max_memory_allocated() if torch.cuda.is_initialized() else None
    print("BENCH " + json.dumps({"peak_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                                 "gpu_peak": gpu, "parameters": max(params.values(), default=0)
                                 and sum(params.values())}), file=sys.stderr)
atexit.register(said)
if %r:  # --own-dtype: as if float64 did not fit (evidence/fit.py), whatever memory is free
    import gradscope.evidence.fit
    gradscope.evidence.fit.available = lambda device: 0
from gradscope.cli.main import entry
sys.argv = %r
if %r and torch.cuda.is_available():  # --peaks: where the GPU's allocation sets new highs
    import traceback
    from torch.overrides import TorchFunctionMode
    highs = []
    class Highs(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            now = torch.cuda.memory_allocated()
            if now > (highs[-1][0] if highs else 0) + (1 << 29):
                frames = [f"{'/'.join(f.filename.split('/')[-2:])}:{f.lineno}:{f.name}"
                          for f in traceback.extract_stack()[:-1]
                          if "gradscope" in f.filename or "tests/data" in f.filename][-7:]
                highs.append((now, frames))
            return out
    Highs().__enter__()
    atexit.register(lambda: print("PEAKS " + json.dumps(
        [[round(b / 2**30, 2), f] for b, f in highs[-12:]]), file=sys.stderr))
if %r:  # --profile DIR: the check under cProfile, its 40 costliest calls written there
    import cProfile, io, pstats
    prof = cProfile.Profile()
    def written():
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(40)
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(25)
        open(%r, "w").write(text.getvalue())
    atexit.register(written)
    prof.enable()
entry()
"""


def scale_rows(threads: int, one_b: bool = False, device: str = "cpu",
               llama_layers: bool = True, timeout: float | None = None,
               runs: tuple[str, ...] = ("passing", "failing"), own_dtype: bool = False,
               only_one_b: bool = False, profile: Path | None = None, peaks: bool = False,
               only: str = "") -> list[dict[str, Any]]:
    """Models at scale, passing and failing (a 1 % error planted in GPT's custom GELU, the
    weight's gradient from the unnormalised input in the Llama's RMSNorm), each `gradscope
    check` in its own process: seconds, the process's peak resident memory and bytes per
    parameter at that peak (the model's own float32 copy included), exit code, and what the
    report says it compared. On a GPU (`device` cuda) the GPU's peak allocation too.
    `profile`: a folder where each check's cProfile summary is written. `peaks`: on a GPU,
    where the allocation set new highs (gradscope's frames), in the row. `only`: the models
    whose label contains it."""
    import os
    import subprocess

    data = Path(__file__).resolve().parent.parent / "tests" / "data"
    out = []
    cases = [] if only_one_b else [c for c in SCALE if llama_layers or c[1] != LLAMA]
    for label, right, wrong, tokens, env in [*cases, *([ONE_B] if one_b or only_one_b else [])]:
        if only not in label:
            continue
        for kind, target in (("passing", right), ("failing", wrong)):
            if kind not in runs:
                continue
            argv = ["gradscope", "check", str(data / target), "--const", f"tokens={tokens}",
                    "--json", "--device", device]
            extra = {**env, "GRADSCOPE_LLAMA_OFF": "1" if kind == "failing" else "0"}
            stats = "" if profile is None else str(
                profile / f"{label.split(' (')[0].replace(' ', '_').replace(',', '')}_{kind}.txt")
            child = CHILD % (threads, own_dtype, argv, peaks, bool(stats), stats)
            started = time.perf_counter()
            try:
                done = subprocess.run([sys.executable, "-c", child],
                                      capture_output=True, text=True, timeout=timeout,
                                      env={**os.environ, **extra})
            except subprocess.TimeoutExpired:
                print(json.dumps({"model": label, "run": kind, "exit": None,
                                  "seconds": f"over {timeout:.0f}"}), flush=True)
                continue
            wall = time.perf_counter() - started
            row = {"model": label, "run": kind, "exit": done.returncode,
                   "seconds": round(wall, 1), **_measured(done.stderr)}
            highs = next((ln for ln in done.stderr.splitlines() if ln.startswith("PEAKS ")), None)
            if highs:
                row["gpu_highs"] = json.loads(highs[len("PEAKS "):])
            if done.returncode not in (0, 1):
                row["error"] = done.stderr.strip().splitlines()[-1:]
            try:
                report = json.loads(done.stdout)
                row["coverage"] = report.get("coverage", "")
                timings = report.get("timings", {})
                row["timings"] = {k: round(v, 1) for k, v in timings.items()
                                  if v >= 1.0 and not k.startswith("gpu_peak.")}
                row["gpu_peak_gb_by_stage"] = {k.removeprefix("gpu_peak."): round(v / 2**30, 2)
                                               for k, v in timings.items()
                                               if k.startswith("gpu_peak.")}
                row["culprit"] = next((d["op"] for d in report["diagnostics"]
                                       if d["kind"] == "culprit"), None)
                row["stepped_aside"] = [n[:160] for n in report["notes"] if "stepped aside" in n]
                row["dtype"] = report.get("dtype")
                row["inner_departure"] = next((d["op"] for d in report["diagnostics"]
                                               if d["kind"] == "inner_departure"), None)
            except ValueError:
                row["coverage"] = done.stderr.strip().splitlines()[-1:] or ""
            print(json.dumps(row), flush=True)
            out.append(row)
    return out


def _measured(stderr: str) -> dict[str, Any]:
    """Peak memory (GB) and bytes per parameter, from the child's BENCH line."""
    line = next((ln for ln in stderr.splitlines() if ln.startswith("BENCH ")), None)
    if line is None:
        return {}
    got = json.loads(line[len("BENCH "):])
    peak = got["peak_kb"] * 1024
    params = got["parameters"] or 0
    row = {"peak_gb": round(peak / 2**30, 2), "parameters": params,
           "bytes_per_parameter": round(peak / params, 1) if params else None}
    if got.get("gpu_peak"):
        row["gpu_peak_gb"] = round(got["gpu_peak"] / 2**30, 2)
        row["gpu_bytes_per_parameter"] = round(got["gpu_peak"] / params, 1) if params else None
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    parser.add_argument("--quick", action="store_true", help="the two named models only")
    parser.add_argument("--no-slow", action="store_true", help="skip gradcheck's slow mode")
    parser.add_argument("--scale", action="store_true",
                        help="models at scale only: GPT tiny, GPT-2 small (124M) and 2 layers "
                        "of the Llama shape, passing and failing, each in its own process "
                        "(seconds, peak memory, bytes per parameter)")
    parser.add_argument("--one-b", action="store_true",
                        help="with --scale: the ~10⁹-parameter Llama shape too (needs "
                        "its bytes per parameter × 10⁹ of memory)")
    parser.add_argument("--device", default="cpu",
                        help="with --scale: gradscope's --device (cuda: the GPU's peak too)")
    parser.add_argument("--no-llama-layers", action="store_true",
                        help="with --scale: leave out the 2-layer Llama rows")
    parser.add_argument("--row-timeout", type=float, help="with --scale: seconds per check")
    parser.add_argument("--runs", default="passing,failing",
                        help="with --scale: passing, failing or both")
    parser.add_argument("--own-dtype", action="store_true",
                        help="with --scale: check as if a float64 check did not fit in memory "
                        "(the model's own dtype, evidence/fit.py), whatever memory is free")
    parser.add_argument("--only-one-b", action="store_true",
                        help="with --scale: the ~10⁹-parameter Llama shape alone")
    parser.add_argument("--only", default="", help="with --scale: the models whose label "
                        "contains this text")
    parser.add_argument("--peaks", action="store_true",
                        help="with --scale on a GPU: where the allocation set new highs")
    parser.add_argument("--profile", type=Path,
                        help="with --scale: write each check's cProfile summary in this folder")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.scale:
        scale_rows(args.threads, args.one_b, args.device, not args.no_llama_layers,
                   args.row_timeout, tuple(args.runs.split(",")), args.own_dtype,
                   args.only_one_b, args.profile, args.peaks, args.only)
        return
    table = rows(args)
    print(f"\n{'model':40} {'tool':15} {'seconds':>8} {'checked':>30}")
    for r in table:
        print(f"{r['model']:40} {r['tool']:15} {r['seconds']:8.2f} "
              f"{r['elements_checked']!s:>30}")


if __name__ == "__main__":
    main()
