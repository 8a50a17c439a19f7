"""Tests mirror the package: every module has a test file of its own (`gradscope/a/b.py` →
`tests/a/test_b.py`; a package's `__init__` → `tests/a/test_a.py` or `tests/test_a.py`; the
package root → `tests/test_init.py`), except the few one-liners listed here."""

from __future__ import annotations

from tests.paths import ROOT

PACKAGE = ROOT / "gradscope"
# nothing to test beyond what they import: a version string, `python -m gradscope`, and
# packages whose __init__ is a docstring
TRIVIAL = {"_version.py", "__main__.py"}


def _test_file(path) -> list:
    rel = path.relative_to(PACKAGE)
    if path.name == "__init__.py":
        if rel.parent == rel.parent.parent:  # the package root
            return [ROOT / "tests" / "test_init.py"]
        name = rel.parent.name
        return [ROOT / "tests" / rel.parent / f"test_{name}.py",
                ROOT / "tests" / rel.parent.parent / f"test_{name}.py"]
    return [ROOT / "tests" / rel.parent / f"test_{path.stem.lstrip('_')}.py"]


def test_every_module_has_its_own_test_file():
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name in TRIVIAL:
            continue
        if path.name == "__init__.py" and len(path.read_text().splitlines()) < 15:
            continue  # a docstring and little else
        if not any(t.exists() for t in _test_file(path)):
            missing.append(str(path.relative_to(ROOT)))
    assert not missing, "modules without a test file of their own:\n" + "\n".join(missing)
