"""A tensor-parallel MLP block checked across 2 ranks (--nproc 2, gloo on the CPU) beside the
same block in one process: gradscope on the whole block, and torch's gradcheck (slow and fast)
on it — gradcheck cannot run the collectives, so its row is the single-process block only.

    python benchmarks/distributed.py [--threads 2] [--repeat 3]
    python benchmarks/distributed.py --fsdp [--width 256] [--nproc 2]

`--fsdp`: a stack of MLP blocks under FSDP2 (benchmarks/fsdp_model.py) checked with --nproc,
each rank's peak resident memory (VmHWM, sampled from /proc while the check runs) printed
beside 16 bytes × the model's parameters / the world size.

The block is examples/distributed.py:ParallelMLP (4 features, hidden 8 split over the ranks;
80 elements checked across ranks); the single-process block is the same shape unsplit (72
elements: x, fc1 and fc2 whole). Prints one JSON row per tool and the ratios; timings are
never asserted anywhere."""

from __future__ import annotations

import argparse
import json
import time

import torch
from torch import nn

import gradscope

TARGET = "examples/distributed.py:ParallelMLP"


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc1 = nn.Linear(4, 8, dtype=torch.float64)
        self.fc2 = nn.Linear(8, 4, bias=False, dtype=torch.float64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.tanh(self.fc1(x)))


def _best(run: object, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        out = run()  # type: ignore[operator]
        times.append(time.perf_counter() - started)
    return min(times), out


def fsdp(width: int, nproc: int) -> None:
    """Each rank's peak memory in a check of an FSDP2 model, beside 16 B × parameters / N."""
    import os
    import threading
    from pathlib import Path

    os.environ["GRADSCOPE_FSDP_WIDTH"] = str(width)
    params = 4 * (2 * 4 * width * width + 5 * width) + width + 1
    peaks: dict[int, int] = {}
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            for proc in Path("/proc").iterdir():
                try:
                    if b"gradscope-ranks-" not in (proc / "cmdline").read_bytes():
                        continue
                    env = dict(e.split(b"=", 1) for e in (proc / "environ").read_bytes()
                               .split(b"\0") if b"=" in e)
                    status = (proc / "status").read_text()
                except OSError:
                    continue
                rank = int(env.get(b"RANK", b"-1"))
                hwm = [int(line.split()[1]) for line in status.splitlines()
                       if line.startswith("VmHWM:")]
                if rank >= 0 and hwm:
                    peaks[rank] = max(peaks.get(rank, 0), hwm[0] * 1024)
            done.wait(0.05)

    watcher = threading.Thread(target=sample, daemon=True)
    watcher.start()
    started = time.perf_counter()
    report = gradscope.check(str(Path(__file__).parent / "fsdp_model.py") + ":Stack",
                             nproc=nproc, shape={"x": (4, width)})
    seconds = time.perf_counter() - started
    done.set()
    watcher.join()
    floor = 16 * params / nproc
    print(json.dumps({"parameters": params, "nproc": nproc, "passed": report.passed,
                      "seconds": round(seconds, 2), "floor_bytes_per_rank": int(floor),
                      "peak_bytes": {r: peaks[r] for r in sorted(peaks)},
                      "peak_over_floor": {r: round(peaks[r] / floor, 2) for r in sorted(peaks)},
                      "bytes_per_parameter": {r: round(peaks[r] / params, 1)
                                              for r in sorted(peaks)}}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--fsdp", action="store_true")
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--nproc", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.fsdp:
        fsdp(args.width, args.nproc)
        return
    block = Block()
    x = torch.randn(2, 4, dtype=torch.float64)
    leaves = [x.clone().requires_grad_()] + [p.detach().clone().requires_grad_()
                                             for p in block.parameters()]
    names = [n for n, _ in block.named_parameters()]

    def f(x_: torch.Tensor, *params: torch.Tensor) -> torch.Tensor:
        return torch.func.functional_call(block, dict(zip(names, params, strict=True)), (x_,))

    rows = {}
    for label, run in [
        ("gradcheck slow (1 process)", lambda: torch.autograd.gradcheck(f, tuple(leaves))),
        ("gradcheck fast (1 process)",
         lambda: torch.autograd.gradcheck(f, tuple(leaves), fast_mode=True)),
        ("gradscope (1 process)", lambda: gradscope.check(block, x).passed),
        ("gradscope --nproc 1", lambda: gradscope.check(TARGET, nproc=1).passed),
        ("gradscope --nproc 2", lambda: gradscope.check(TARGET, nproc=2).passed),
    ]:
        seconds, passed = _best(run, args.repeat)
        rows[label] = seconds
        print(json.dumps({"tool": label, "seconds": round(seconds, 3), "passed": passed}))
    single = rows["gradscope (1 process)"]
    for label, seconds in rows.items():
        print(f"{label:30s} {seconds:8.3f} s  {seconds / single:6.2f}× gradscope in 1 process")


if __name__ == "__main__":
    main()
