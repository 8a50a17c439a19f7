"""Real libraries' own gradcheck tests, each run twice — as they are, and with `pytest
--gradscope` (every torch.autograd.gradcheck/gradgradcheck call checked by gradscope) — printing
per library: tests and gradcheck calls, tests both pass, false alarms (torch passes, gradscope
fails with its GradcheckError), crashes (torch passes, gradscope's run raises anything else),
hollow hand-overs (a call handed to torch saying the output does not depend differentiably on
the inputs), calls handed to torch, and the time ratio. The floor: everything torch's gradcheck
passes, gradscope passes too.

    pip install --no-deps entmax==1.3 roma==1.8.0 gpytorch==1.15.2 linear_operator==0.6.1 \\
        sparsemax==0.1.9 torch-harmonics==0.8.0 torchdiffeq==0.2.5 e3nn==0.5.6 opt_einsum \\
        opt_einsum_fx
    pip install scipy jaxtyping scikit-learn parameterized==0.9.0 cvxpy==1.8.2 diffcp==1.1.9 \\
        numba absl-py
    # kornia: its repository at the pinned commit (tests, `testing`, conftest.py), installed
    pip install --no-deps kornia_rs numpy /path/to/kornia-checkout
    python benchmarks/library_suite.py [NAME …] [--threads 2] [--tests kornia=/path/to/...]

Only the gradient tests are kept: the test functions whose source calls gradcheck or
gradgradcheck (read with `ast`). Tests come from the installed package where it ships them,
else from the pinned version's source distribution on PyPI (`pip download --no-binary`), else
from the project's repository at the release's commit (cloned, or `--tests NAME=PATH`); they
run in a temporary folder, so nothing of this repository's pytest configuration applies; each
test starts from the same seed in both runs (torch seeds its default generator at random per
process), so both runs check the same inputs.
Timings are printed, never asserted."""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Library:
    """A pinned library, where its tests are, and which of their files to read."""

    pin: str  # name==version
    field: str  # what it is, for the table
    source: str  # "package": the installed package ships its tests; "sdist": PyPI's tarball;
    # "git": the release's commit of the project's repository (`--tests NAME=PATH` a checkout)
    folder: str  # the tests' folder (relative to the package, the sdist's or the repo's root)
    files: str = "test_*.py"
    repo: str = ""  # (git) https URL @ the release's commit
    # files and folders beside the tests that they import (a `testing` package, the root
    # conftest.py with their fixtures: ours is appended to it)
    extra: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.pin.split("==")[0]

    @property
    def module(self) -> str:
        return self.name.replace("-", "_")

    @property
    def version(self) -> str:
        return self.pin.split("==")[1]


LIBRARIES = {lib.name: lib for lib in (
    Library("entmax==1.3", "sparse activations, classmethod Functions", "package", "."),
    Library("roma==1.8.0", "rotations and Procrustes, custom backwards", "sdist", "test"),
    Library("gpytorch==1.15.2", "Gaussian-process kernels", "sdist", "test/functions"),
    Library("sparsemax==0.1.9", "sparsemax Function", "sdist", "tests"),
    Library("torch-harmonics==0.8.0", "spherical harmonic transforms and convolutions",
            "sdist", "tests"),
    Library("torchdiffeq==0.2.5", "ODE solvers, adjoint method", "git", "tests", "*_tests.py",
            "https://github.com/rtqichen/torchdiffeq@a88aac53cae738addee44251288ce5be9a018af3"),
    Library("e3nn==0.5.6", "equivariant networks: spherical harmonics, soft steps", "sdist",
            "tests", "*_test.py"),
    # (its tests need the repository's code: `pip install --no-deps PATH` of the checkout)
    Library("kornia==0.9.0rc1", "computer vision: filters, geometry, color, losses", "git",
            "tests", "test_*.py",
            "https://github.com/kornia/kornia@b4f5a78a13891c7ac4c1cd9695941380273e981d",
            extra=("testing", "conftest.py")),
    # (an iterative conic solve differentiated through its KKT conditions: pip install cvxpy
    # diffcp, then `pip install --no-deps PATH` of the checkout)
    # (soft sorting and ranking: isotonic regression solved by PAV in numpy, wrapped in
    # Functions; pip install numba absl-py, then `pip install --no-deps PATH` of the checkout)
    Library("fast_soft_sort==0.1", "soft sort and rank: isotonic regression (PAV) in Functions",
            "git", "tests", "pytorch_ops_test.py",
            "https://github.com/google-research/fast-soft-sort@"
            "6a52ce79869ab16e1e0f39149a84f50f8ad648c5"),
    Library("cvxpylayers==1.1.0", "convex optimization layers: a conic solve, diffcp's backward",
            "git", "tests", "test_torch.py",
            "https://github.com/cvxpy/cvxpylayers@f0b1c159285a40b274970afbdc4259e97db19da5"),
)}

# (written into the run's folder: the drop-in's own counts, for the table)
CONFTEST = """
import json, os, random
import pytest
import torch

@pytest.fixture(autouse=True)
def _same_draws():
    # torch's default generator is seeded at random in each process: without this, a test
    # drawing its inputs would check other inputs under --gradscope than in the plain run, and a
    # test that fails on some draws (entmax's normmax with alpha < 1) would count as a false
    # alarm or a miss by chance
    torch.manual_seed(0)
    random.seed(0)
    yield

def pytest_sessionfinish(session):
    if session.config.getoption("gradscope", False):
        from dataclasses import asdict
        from gradscope.testing.stats import STATS
        with open(os.environ["GRADSCOPE_BENCH_STATS"], "w") as f:
            json.dump(asdict(STATS), f)
"""
HOLLOW = "does not depend differentiably"


def _cloned(lib: Library, into: Path) -> Path:
    url, _, commit = lib.repo.partition("@")
    subprocess.run(["git", "clone", "-q", url, str(into / "repo")], check=True, timeout=600)
    subprocess.run(["git", "-C", str(into / "repo"), "checkout", "-q", commit], check=True)
    return into / "repo"


def _tests(lib: Library, into: Path, checkout: Path | None) -> Path:
    """The library's test folder, copied to `into`; returns the folder pytest runs from."""
    if lib.source == "package":  # (its test modules only: the package's own are imported)
        root = Path(importlib.import_module(lib.module).__file__).parent  # type: ignore[arg-type]
        (into / "run" / "tests").mkdir(parents=True)
        for path in (root / lib.folder).rglob(lib.files):
            shutil.copy(path, into / "run" / "tests" / path.name)
        (into / "run" / "conftest.py").write_text(CONFTEST)
        return into / "run"
    if lib.source == "git":
        root = checkout if checkout else _cloned(lib, into)
        found = root / lib.folder
        _extras(lib, root, into / "run")
    else:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                        "--no-binary", ":all:", lib.pin, "-d", str(into / "sdist")],
                       check=True, timeout=600)
        archive = next((into / "sdist").glob("*.tar.gz"))
        with tarfile.open(archive) as tar:
            tar.extractall(into / "sdist", filter="data")
        found = next(p for p in (into / "sdist").iterdir() if p.is_dir()) / lib.folder
    top = lib.folder.split("/")[0] if lib.folder != "." else "tests"
    shutil.copytree(found, into / "run" / top,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    conftest = into / "run" / "conftest.py"
    conftest.write_text((conftest.read_text() if conftest.exists() else "") + CONFTEST)
    return into / "run"


def _extras(lib: Library, root: Path, run: Path) -> None:
    """The files and folders the tests import from the library's source root."""
    run.mkdir(parents=True, exist_ok=True)
    for name in lib.extra:
        if (root / name).is_dir():
            shutil.copytree(root / name, run / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy(root / name, run / name)


def _gradient_tests(run: Path, pattern: str) -> list[str]:
    """pytest arguments selecting the test functions whose source calls gradcheck or
    gradgradcheck: their files, and `-k` with their names (a name also selects what
    `parameterized` generates from it: `test_grads_0_…`)."""
    files, names = [], set()
    for path in sorted(run.rglob(pattern)):
        text = path.read_text()
        tree = ast.parse(text)
        functions = [f for node in tree.body for f in (
            [node] if isinstance(node, ast.FunctionDef) else
            [f for f in node.body if isinstance(f, ast.FunctionDef)]
            if isinstance(node, ast.ClassDef) else [])]
        # (a test that calls a helper of its file that calls gradcheck: fast-soft-sort's
        # `self._test(...)`)
        helpers = {f.name for f in functions if not f.name.startswith("test")
                   and "gradcheck" in ast.get_source_segment(text, f)}
        for fn in functions:
            source = ast.get_source_segment(text, fn)
            if fn.name.startswith("test") and ("gradcheck" in source or any(
                    f"{h}(" in source for h in helpers)):
                names.add(fn.name)
                files.append(str(path.relative_to(run)))
    return [*dict.fromkeys(files), "-k", " or ".join(sorted(names))] if names else []


@dataclass(frozen=True)
class Run:
    outcomes: dict[str, tuple[str, str]]  # test id → (passed|failed|skipped, failure message)
    seconds: float
    stats: dict


def _run(run: Path, ids: list[str], gradscope: bool, threads: int) -> Run:
    report = run / ("ours.xml" if gradscope else "torch.xml")
    stats = run / "stats.json"
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "GRADSCOPE_BENCH_STATS": str(stats)}
    tic = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    "-p", "no:randomly", f"--junitxml={report}",
                    *(["--gradscope"] if gradscope else []), *ids],
                   capture_output=True, text=True, env=env, cwd=run, timeout=3600)
    seconds = time.perf_counter() - tic
    outcomes = {}
    for case in ET.parse(report).iter("testcase"):
        key = f"{case.get('classname')}::{case.get('name')}"
        bad = next((c for c in case if c.tag in ("failure", "error")), None)
        skipped = any(c.tag == "skipped" for c in case)
        outcomes[key] = ("failed", bad.get("message", "")) if bad is not None else \
            ("skipped", "") if skipped else ("passed", "")
    counted = json.loads(stats.read_text()) if gradscope and stats.exists() else {}
    return Run(outcomes, seconds, counted)


def measure(lib: Library, threads: int, checkout: Path | None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        run = _tests(lib, Path(tmp), checkout)
        ids = _gradient_tests(run, lib.files)
        if not ids:
            sys.exit(f"{lib.pin}: no test calls gradcheck")
        plain = _run(run, ids, False, threads)
        ours = _run(run, ids, True, threads)
    both = alarms = crashes = 0
    for key, (state, _) in plain.outcomes.items():
        theirs, message = ours.outcomes.get(key, ("missing", ""))
        if state != "passed":
            continue
        if theirs == "passed":
            both += 1
        elif "GradcheckError" in message:
            alarms += 1
            print(f"  false alarm {key}: {message[:160]}")
        else:
            crashes += 1
            print(f"  crash {key}: {message[:160]}")
    reasons = ours.stats.get("reasons", {})
    for why, count in reasons.items():
        print(f"  handed to torch ×{count}: {why}")
    return {"library": f"{lib.name} {lib.version}", "field": lib.field,
            "tests": len(plain.outcomes),
            "torch passes": sum(s == "passed" for s, _ in plain.outcomes.values()),
            "calls": ours.stats.get("passed", 0) + ours.stats.get("failed", 0)
            + ours.stats.get("delegated", 0) + sum(ours.stats.get("nothing", {}).values()),
            "both pass": both, "false alarms": alarms, "crashes": crashes,
            "hollow": sum(n for why, n in reasons.items() if HOLLOW in why),
            "to torch": ours.stats.get("delegated", 0),
            "torch s": round(plain.seconds, 1), "gradscope s": round(ours.seconds, 1),
            "ratio": round(ours.seconds / plain.seconds, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("libraries", nargs="*", default=list(LIBRARIES))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tests", action="append", default=[], metavar="NAME=PATH",
                        help="a checkout of a git-sourced library at its release's commit")
    args = parser.parse_args()
    checkouts = {k: Path(v) for k, _, v in (t.partition("=") for t in args.tests)}
    rows = []
    for name in args.libraries:
        lib = LIBRARIES.get(name)
        if lib is None:
            sys.exit(f"unknown library {name}; known: {', '.join(LIBRARIES)}")
        try:
            installed = importlib.metadata.version(lib.name)
        except importlib.metadata.PackageNotFoundError:
            installed = None
        if installed != lib.version:
            print(f"{lib.name}: {installed or 'not installed'}, measured on {lib.pin} "
                  f"(pip install --no-deps {lib.pin}); skipped")
            continue
        print(f"{lib.pin} …", flush=True)
        rows.append(measure(lib, args.threads, checkouts.get(lib.name)))
    if not rows:
        return
    keys = list(rows[0])
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for row in rows:
        print("| " + " | ".join(str(row[k]) for k in keys) + " |")


if __name__ == "__main__":
    main()
