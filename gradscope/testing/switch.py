"""The switch that routes torch's gradcheck/gradgradcheck through gradscope's drop-in:
`install`/`uninstall` (the pytest plugin calls them), and for test runners other than pytest
`python -m gradscope.testing.switch -m unittest discover tests` or
`python -m gradscope.testing.switch my_checks.py ARGS`."""

from __future__ import annotations

import importlib.util
import os
import runpy
import sys

from gradscope.testing.gradcheck import (
    STATS,
    TORCH_GRADCHECK,
    TORCH_GRADGRADCHECK,
    gradcheck,
    gradgradcheck,
)


def install() -> None:
    """Route every later `torch.autograd.gradcheck` / `gradgradcheck` call (also through
    `torch.autograd.gradcheck` the module, and through wrappers that look them up at call
    time) to the drop-in. `from torch.autograd import gradcheck` done earlier keeps torch's."""
    import torch.autograd

    for owner in (torch.autograd, sys.modules["torch.autograd.gradcheck"]):
        owner.gradcheck = gradcheck
        owner.gradgradcheck = gradgradcheck


def uninstall() -> None:
    """Give torch its own functions back."""
    import torch.autograd

    for owner in (torch.autograd, sys.modules["torch.autograd.gradcheck"]):
        owner.gradcheck = TORCH_GRADCHECK
        owner.gradgradcheck = TORCH_GRADGRADCHECK


def installed() -> bool:
    import torch.autograd

    return torch.autograd.gradcheck is gradcheck


def summary() -> str:
    within = f" in {len(STATS.tests)} test(s)" if STATS.tests else ""
    line = (f"gradscope: {STATS.calls} gradcheck call(s){within} routed through gradscope: "
            f"{STATS.passed} passed, {STATS.failed} failed with an explanation")
    if STATS.failed_tests:
        line += f" (failing {len(STATS.failed_tests)} test(s))"
    if STATS.returned_false:
        line += (f", {STATS.returned_false} returned False to the test that asked "
                 "(raise_exception=False: the test decides)")
    if STATS.warned:
        line += (f", {STATS.warned} passed as torch's gradcheck judges them with a "
                 "disagreement gradscope's own check found (GradscopeWarning; "
                 "--gradscope-strict fails them)")
    if STATS.nothing:
        empty = sum(STATS.nothing.values())
        line += f", {empty} with nothing to compare (zero-element inputs or outputs)"
    if STATS.delegated:
        why = "; ".join(f"{w} ({n})" for w, n in sorted(STATS.reasons.items())[:5])
        line += (f", {STATS.delegated} decided by torch's own gradcheck (gradscope cannot "
                 f"check them: {why})")
    return line


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(__doc__.strip())
        raise SystemExit(0 if args else 2)
    if args[0] == "-m":
        if len(args) < 2:
            _refuse("-m needs a module name")
        if not _findable(args[1]):
            _refuse(f"no module named {args[1]!r}")
    elif not os.path.isfile(args[0]):
        _refuse(f"no such file: {args[0]!r}")
    install()
    try:
        if args[0] == "-m" and len(args) > 1:
            sys.argv = [args[1], *args[2:]]
            runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = args
            runpy.run_path(args[0], run_name="__main__")
    finally:
        print(summary(), file=sys.stderr)


def _findable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a parent package that is missing, an empty name
        return False


def _refuse(what: str) -> None:
    print(f"gradscope: error: {what}; usage: python -m gradscope.testing.switch SCRIPT.py "
          "[ARGS] or -m MODULE [ARGS]", file=sys.stderr)
    raise SystemExit(2)


if __name__ == "__main__":
    main()
