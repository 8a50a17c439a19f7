"""Folders the tests read: the repository root, its examples and the test data modules."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
DATA = ROOT / "tests" / "data"
SEEDS = f"{EXAMPLES}/seed_functions.py"  # the seeds' Functions and Module, written correctly
BUGGY = f"{EXAMPLES}/buggy_functions.py"  # and as the seeds wrote them


def load(path: Path, name: str):
    """An object from a Python file (a target module of the tests or examples)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"_test_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def python_prints(code: str) -> list[str]:
    """What a fresh Python process running `code` (with this gradscope importable) prints,
    split into words: for what must hold before anything else is imported."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, check=True).stdout.split()
