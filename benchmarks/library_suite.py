"""A real library's own gradcheck tests, run twice — as they are, and with `pytest --gradscope`
(every torch.autograd.gradcheck call checked by gradscope) — printing each run's counts, its
time and the ratio. The floor: everything torch's gradcheck passes, gradscope passes too.

    pip install entmax==1.3          # (pinned: the suite this was measured on)
    python benchmarks/library_suite.py entmax [--threads 2]

The library's test modules shipped in its installed package (`test_*.py`) are copied to a
temporary folder and run there, so that nothing of this repository's pytest configuration
applies. Timings are printed, never asserted."""

from __future__ import annotations

import argparse
import importlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _tests(package: str) -> list[Path]:
    root = Path(importlib.import_module(package).__file__).parent  # type: ignore[arg-type]
    found = sorted(root.rglob("test_*.py"))
    if not found:
        sys.exit(f"{package} ships no test_*.py modules in {root}")
    return found


def _run(folder: Path, extra: list[str], threads: int) -> tuple[str, float]:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    tic = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           *extra, str(folder)], capture_output=True, text=True, env=env,
                          cwd=folder, timeout=3600)
    seconds = time.perf_counter() - tic
    lines = [ln for ln in done.stdout.splitlines() if re.search(r"\d+ (passed|failed)", ln)
             or ln.startswith("gradscope:")]
    return " | ".join(lines[-2:]) or done.stdout[-300:], seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("package")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for path in _tests(args.package):
            shutil.copy(path, folder / path.name)
        plain, t_plain = _run(folder, [], args.threads)
        ours, t_ours = _run(folder, ["--gradscope"], args.threads)
    print(f"torch's gradcheck: {plain}  ({t_plain:.1f} s)")
    print(f"pytest --gradscope: {ours}  ({t_ours:.1f} s, {t_ours / t_plain:.2f}× torch's)")


if __name__ == "__main__":
    main()
