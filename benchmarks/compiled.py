"""--compile beside torch's gradcheck on the same compiled function, compile time included.

    python benchmarks/compiled.py [--backend inductor] [--threads 2] [--device cpu]

Each measurement runs in a fresh process with inductor's on-disk caches off, so every tool
pays dynamo's and the backend's compile itself: gradscope.check(compile=BACKEND) (eager
autograd, sympy, finite differences and the compiled run); gradscope.check of a function the
target's file already compiled (no --compile: it is called the plain way, one mode); and
torch.autograd.gradcheck (slow and fast mode) of torch.compile(fn, backend=BACKEND). Targets:
examples/compiled.py:gelu_tanh on 64 elements, and a two-layer tanh block (x 8×4, weights 4×8
and 8×2) as one function of all its tensors. Prints one JSON row per tool and target and the
ratios; timings are never asserted anywhere."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

# one measurement, run by a fresh interpreter: prints {"seconds", "verdict"}
ONE = r"""
import json, sys, time
import torch
torch.set_num_threads(int(sys.argv[3]))
started = time.perf_counter()
tool, backend, _, target, device = sys.argv[1:6]
sys.path.insert(0, "examples")
import compiled as ex


def block(x, w1, w2):
    return torch.tanh(x @ w1) @ w2


shapes = {"gelu": {"x": (64,)}, "block": {"x": (8, 4), "w1": (4, 8), "w2": (8, 2)}}[target]
if tool == "gradscope":
    import gradscope
    name = "examples/compiled.py:gelu_tanh" if target == "gelu" else "benchmarks/compiled.py:block"
    verdict = gradscope.check(name, shape=shapes, compile=backend, device=device).passed
elif tool == "gradscope_precompiled":  # the user's file compiles it; no --compile
    import gradscope
    name = "benchmarks/compiled.py:" + ("gelu" if target == "gelu" else "block") + "_compiled"
    verdict = gradscope.check(name, shape=shapes, device=device).passed
else:
    fn = ex.gelu_tanh if target == "gelu" else block
    gen = torch.Generator().manual_seed(0)
    args = tuple(torch.randn(s, dtype=torch.float64, generator=gen).to(device).requires_grad_()
                 for s in shapes.values())
    try:
        verdict = torch.autograd.gradcheck(torch.compile(fn, backend=backend), args,
                                           fast_mode=tool == "gradcheck_fast")
    except Exception as exc:  # gradcheck's own refusal of a compiled function
        verdict = f"raised {type(exc).__name__}: {str(exc).splitlines()[0][:80]}"
print(json.dumps({"seconds": time.perf_counter() - started, "verdict": verdict}))
"""

TOOLS = ("gradscope", "gradscope_precompiled", "gradcheck_slow", "gradcheck_fast")


def block(x, w1, w2):  # (the block target, for gradscope: benchmarks/compiled.py:block)
    import torch

    return torch.tanh(x @ w1) @ w2


def _compiled(fn):  # (compiled on first call, with the backend the run measures)
    import torch

    return torch.compile(fn, backend=os.environ.get("BENCH_BACKEND", "inductor"))


def _gelu(x):
    import torch

    return 0.5 * x * (1 + torch.tanh(0.7978845608 * (x + 0.044715 * x**3)))


gelu_compiled, block_compiled = _compiled(_gelu), _compiled(block)


def _measure(tool: str, backend: str, threads: int, target: str, device: str) -> dict:
    env = {**os.environ, "TORCHINDUCTOR_FX_GRAPH_CACHE": "0",
           "TORCHINDUCTOR_AUTOGRAD_CACHE": "0", "BENCH_BACKEND": backend}
    done = subprocess.run([sys.executable, "-c", ONE, tool, backend, str(threads), target,
                           device],
                          capture_output=True, text=True, env=env, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="inductor")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu", help="cpu or cuda: every tool's tensors")
    parser.add_argument("--targets", default="gelu,block", help="gelu, block or both")
    args = parser.parse_args()
    for target in args.targets.split(","):
        rows = {tool: _measure(tool, args.backend, args.threads, target, args.device)
                for tool in TOOLS}
        for tool, row in rows.items():
            print(json.dumps({"target": target, "backend": args.backend, "tool": tool,
                              "device": args.device, **row}))
        for tool in ("gradscope", "gradscope_precompiled"):
            ours = rows[tool]["seconds"]
            print(json.dumps({"target": target, "tool": tool, "ratio_to_gradcheck_slow":
                              round(ours / rows["gradcheck_slow"]["seconds"], 2),
                              "ratio_to_gradcheck_fast":
                              round(ours / rows["gradcheck_fast"]["seconds"], 2)}))


if __name__ == "__main__":
    main()
