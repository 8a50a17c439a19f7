"""`gradscope run` on a config of 20 checks: wall time with one worker, two workers, and in the
calling process (no isolation), against 20 cold starts of `gradscope check` (what a CI script
calling the CLI per check pays). Timings only: correctness is the test suite's job.

    python benchmarks/run_jobs.py [--checks 20]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# a mix of sizes a CI config has: most checks take a fraction of a second, some a few
TARGETS = ['"sum((x - mean(x))**2) * mean(cos(y))"', '"3*a + 2*b*b + log(c)"',
           '"softmax(x) * w"', '"sum(round(x) * w)"',
           f'"{ROOT}/examples/seed_functions.py:KillHead"',
           f'"{ROOT}/examples/seed_functions.py:RoundSTE"', '"x @ y"',
           f'"{ROOT}/examples/seed_functions.py:AbsProd"', '"logsumexp(x * 3)"',
           '"sum(tanh(x @ y))"']


def _config(folder: Path, count: int) -> Path:
    lines = ["[tool.gradscope]", "seed = 1", ""]
    for k in range(count):
        target = TARGETS[k % len(TARGETS)]
        lines += ["[[tool.gradscope.checks]]", f'name = "c{k}"', f"target = {target}"]
        if "KillHead" in target:
            lines += ['at = {input = "randn(3,8)"}', "arg = {n = 2}"]
        elif "@" in target:
            lines += ['shape = {x = [60, 60], y = [60, 60]}']
        elif "mean(x)" in target:
            lines += ['shape = "6000"']
        else:
            lines += ['shape = "2000"']
        lines.append("")
    path = folder / "gradscope.toml"
    path.write_text("\n".join(lines))
    return path


def _wall(args: list[str]) -> float:
    tic = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(args)} failed ({done.returncode}): {done.stderr[-500:]}")
    return time.perf_counter() - tic


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--checks", type=int, default=20)
    count = parser.parse_args().checks
    cli = [sys.executable, "-m", "gradscope"]
    with tempfile.TemporaryDirectory() as folder:
        config = str(_config(Path(folder), count))
        rows = [(f"gradscope run --jobs {j}", _wall([*cli, "run", config, "--jobs", str(j)]))
                for j in (1, 2)]
        code = ("import gradscope, sys; s = gradscope.run_config(sys.argv[1], isolate=False); "
                "sys.exit(s.exit_code if s.exit_code in (0, 1) else 5)")
        rows.append(("in one process (isolate=False)", _wall([sys.executable, "-c", code,
                                                              config])))
        one = _wall([*cli, "check", "sum(sin(x) * y)", "--shape", "200"])
        rows.append((f"{count} × `gradscope check` (one measured: {one:.2f} s)", one * count))
    width = max(len(r[0]) for r in rows)
    print(f"{count} checks, wall time")
    for label, seconds in rows:
        print(f"  {label:<{width}}  {seconds:6.2f} s")


if __name__ == "__main__":
    main()
