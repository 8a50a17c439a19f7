"""gradscope on a CUDA GPU, in one run: custom ops, --compile (inductor makes Triton kernels
there), --autocast, torch.func-built targets and a million-element expression, each checked
with `device="cuda"` in its own process; then the models at scale (GPT-2 small, the 10⁹
Llama shape) with `--device cuda`; then --compile's time beside torch's gradcheck of the same
compiled function on the GPU.

    python benchmarks/cuda.py [--device cuda] [--out rows.jsonl] [--no-features] [--no-models]
                              [--no-one-b] [--no-compiled] [--runs passing,failing]

Every row is printed as JSON as it is measured (and appended to --out): what was checked,
whether it passed as expected, seconds, and the culprit or failing kinds. `--device cpu` runs
the same rows on the CPU (the script's own test). Timings are never asserted anywhere."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
HERE = ROOT / "benchmarks"

# one check in a fresh interpreter: prints a summary of its report as JSON
ONE = r"""
import json, sys, time
import torch
started = time.perf_counter()
import gradscope
spec = json.loads(sys.argv[1])
kw = spec["kw"]
if "shape" in kw:
    kw["shape"] = {k: tuple(v) for k, v in kw["shape"].items()}
if "at_randperm" in spec:  # a channels_last_3d input, as pytorch #197888 needs
    torch.manual_seed(0)
    shape = spec["at_randperm"]
    t = torch.randperm(torch.Size(shape).numel()).double().reshape(shape)
    kw["at"] = {"t": t.contiguous(memory_format=torch.channels_last_3d)}
report = gradscope.check(spec["target"], device=spec["device"], **kw)
d = report.to_dict()
found = [x for x in d["diagnostics"] if x["kind"] in __import__(
    "gradscope.report.status", fromlist=["FAILING_KINDS"]).FAILING_KINDS]
print("ROW " + json.dumps({
    "seconds": round(time.perf_counter() - started, 2), "passed": d["passed"],
    "device": d["device"], "failing": sorted({x["kind"] for x in found}),
    "culprit": next((x.get("op") for x in d["diagnostics"] if x["kind"] == "culprit"), None),
    "first": (found[0]["message"][:200] if found else None),
    "failures": [f"{x['subject'][:60]}: {x['count']}" for x in d["failures"]][:4],
    "compile": d.get("compile"), "calls": d["timings"].get("calls.total"),
    "low_precision": [n[:160] for n in d["notes"] if "autocast" in n][:1],
    "stepped_aside": [n[:160] for n in d["notes"] if "stepped aside" in n]}))
"""


def _spec(label: str, target: str, expect: bool, **kw: Any) -> dict[str, Any]:
    return {"label": label, "target": target, "expect": expect, "kw": kw}


def feature_specs() -> list[dict[str, Any]]:
    """(label, target, expected verdict, keywords): each capability right and wrong."""
    ops, opc = str(DATA / "custom_ops.py"), str(DATA / "opcheck_ops.py")
    comp, func = str(DATA / "compiled.py"), str(DATA / "functional.py")
    amp = str(HERE / "cuda_targets.py")
    rev, calls = str(DATA / "reversible.py"), str(DATA / "call_dependent.py")
    rules, par = str(DATA / "batch_rules.py"), str(DATA / "parallel.py")
    return [
        _spec("expression", "3*a + 2*b*b + log(c)", True, shape={"a": [1000]}),
        _spec("expression 3 × 1,000,000", "3*a + 2*b*b + log(c)", True,
              shape={"a": [1000000]}),
        _spec("custom op", f"{ops}:sine", True),
        _spec("custom op, wrong registered backward", f"{ops}:sine_bug", False),
        _spec("function calling a wrong custom op", f"{ops}:uses_sine_bug", False),
        _spec("custom op with opcheck's tests", f"{opc}:cube", True, shape={"x": [4]}),
        _spec("custom op without a fake kernel", f"{opc}:no_fake", False, shape={"x": [3]}),
        _spec("--compile inductor", f"{comp}:smooth", True, shape={"x": [5]},
              compile="inductor"),
        _spec("--compile inductor, a module", f"{comp}:Block", True, shape={"x": [4, 3]},
              compile="inductor"),
        _spec("--compile inductor, pytorch #198119 (CPU repro)", f"{comp}:avg_pool_ceil",
              None, shape={"x": [1, 1, 6]}, compile="inductor"),
        _spec("--compile inductor, pytorch #197888 (CPU repro)",
              f"{comp}:adaptive_max_pool3d", None, compile="inductor"),
        _spec("--compile aot_eager, pytorch #193279", f"{comp}:grad_of_sin_loss", False,
              shape={"x": [4]}, compile="aot_eager"),
        _spec("--autocast bfloat16, custom_fwd Function", f"{amp}:Head", True,
              shape={"x": [3, 8]}, autocast="bfloat16"),
        _spec("--autocast bfloat16, custom_bwd forgets the scale", f"{amp}:HeadBug", False,
              shape={"x": [3, 8]}, autocast="bfloat16"),
        _spec("--autocast float16, plain matmuls", str(DATA / "mixed.py") + ":mlp", True,
              shape={"x": [3, 4], "w1": [4, 5], "w2": [5, 2]}, autocast="float16"),
        _spec("torch.func.grad-made", f"{func}:grad_loss", True, shape={"x": [5]}),
        _spec("vmap inside", f"{func}:per_row", True, shape={"x": [3, 4]}),
        _spec("jacrev inside", f"{func}:jac_norm", True, shape={"x": [4]}),
        _spec("Function inside vmap, backward twice too large", f"{func}:row_norms_bug",
              False, shape={"x": [3, 4]}),
        _spec("--autocast bfloat16, float32 custom_bwd 8 % too large", f"{amp}:HeadEight",
              False, shape={"x": [3, 8]}, autocast="bfloat16"),
        _spec("reversible block re-running its modules in backward", f"{rev}:RevBlock", True,
              shape={"x": [3, 4]}),
        _spec("reversible block freeing its input, planted 1.5×", f"{rev}:FreeingRevBlockBug",
              False, shape={"x": [3, 4]}),
        _spec("backward wrong on its 2nd call", f"{calls}:SecondCallWrong", False,
              shape={"x": [5]}),
        _spec("backward NaN on every 2nd call", f"{calls}:EverySecondWrong", False,
              shape={"x": [5]}),
        _spec("wrong vmap rule hiding a wrong backward", f"{rules}:wrong_both_rows", False,
              shape={"x": [4, 6]}),
        _spec("wrong vmap rule, right backward", f"{rules}:wrong_rule_rows", True,
              shape={"x": [4, 6]}),
        # the nccl path (gloo with --device cpu): one rank, as one GPU allows (nccl refuses
        # two ranks on one device); its launch, work group and control groups all run
        _spec("--nproc 1: Megatron regions on the work group", f"{par}:ParallelMLP", True,
              nproc=1),
        _spec("--nproc 1: DDP", f"{par}:DataParallel", True, nproc=1),
        _spec("--nproc 1: DDP, the loss all-reduced in place", f"{par}:DataParallelDoubleReduce",
              True, nproc=1),
    ]


def _run_one(spec: dict[str, Any], device: str, timeout: float) -> dict[str, Any]:
    body = {**spec, "device": device}
    if spec["target"].endswith(":adaptive_max_pool3d"):
        body["at_randperm"] = [1, 4, 4, 6, 10]
    started = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-c", ONE, json.dumps(body)], cwd=ROOT,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"check": spec["label"], "outcome": f"timed out after {timeout:.0f} s"}
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("ROW ")), None)
    if line is None:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1][:300]
        return {"check": spec["label"], "outcome": f"exit {done.returncode}: {tail}",
                "seconds": round(time.perf_counter() - started, 1)}
    row = json.loads(line[4:])
    expect = spec["expect"]
    outcome = ("as expected" if expect is None or row["passed"] == expect
               else "UNEXPECTED")
    return {"check": spec["label"], "outcome": outcome, **row}


def _emit(row: dict[str, Any], out: Path | None) -> None:
    text = json.dumps(row)
    print(text, flush=True)
    if out is not None:
        with out.open("a") as f:
            f.write(text + "\n")


def versions(device: str) -> dict[str, Any]:
    import torch

    row: dict[str, Any] = {"python": sys.version.split()[0], "torch": torch.__version__,
                           "device": device}
    if device.startswith("cuda"):
        row["gpu"] = torch.cuda.get_device_name(0)
        row["gpu_memory_gb"] = round(torch.cuda.get_device_properties(0).total_memory / 2**30)
    return row


def models(device: str, one_b: bool, threads: int, out: Path | None, runs: str) -> None:
    """benchmarks/models.py --scale on the device, a row at a time."""
    argv = [sys.executable, str(HERE / "models.py"), "--scale", "--device", device,
            "--threads", str(threads), "--no-llama-layers", "--row-timeout", "200",
            "--runs", runs, *(["--one-b"] if one_b else [])]
    with subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("{"):
                _emit({"models": json.loads(line)}, out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--jobs", type=int, default=4, help="feature checks at a time")
    parser.add_argument("--timeout", type=float, default=120, help="seconds per check")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--no-models", action="store_true")
    parser.add_argument("--no-one-b", action="store_true")
    parser.add_argument("--no-compiled", action="store_true")
    parser.add_argument("--no-features", action="store_true")
    parser.add_argument("--runs", default="passing,failing", help="the models' runs")
    args = parser.parse_args()
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        sys.exit(f"benchmarks/cuda.py: torch {torch.__version__} sees no CUDA GPU here; "
                 "run it where one is, or with --device cpu")
    os.environ.setdefault("OMP_NUM_THREADS", "2")
    _emit({"versions": versions(args.device)}, args.out)
    with ThreadPoolExecutor(args.jobs) as pool:
        specs = [] if args.no_features else feature_specs()
        for row in pool.map(lambda s: _run_one(s, args.device, args.timeout), specs):
            _emit(row, args.out)
    if not args.no_models:
        models(args.device, not args.no_one_b, args.threads, args.out, args.runs)
    if not args.no_compiled:
        done = subprocess.run([sys.executable, str(HERE / "compiled.py"), "--device",
                               args.device, "--targets", "gelu", "--threads",
                               str(args.threads)], cwd=ROOT, capture_output=True, text=True)
        for line in done.stdout.splitlines():
            if line.startswith("{"):
                _emit({"compiled": json.loads(line)}, args.out)
        if done.returncode:
            _emit({"compiled": done.stderr.strip().splitlines()[-1:]}, args.out)


if __name__ == "__main__":
    main()
