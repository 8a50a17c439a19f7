"""Run a script or module with torch's gradcheck routed through gradscope (for test runners
other than pytest): `python -m gradscope.testing.switch -m unittest discover tests` or
`python -m gradscope.testing.switch my_checks.py ARGS`."""

from __future__ import annotations

import runpy
import sys


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(__doc__.strip())
        raise SystemExit(0 if args else 2)
    from gradscope.testing import gradcheck

    gradcheck.install()
    try:
        if args[0] == "-m" and len(args) > 1:
            sys.argv = [args[1], *args[2:]]
            runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = args
            runpy.run_path(args[0], run_name="__main__")
    finally:
        stats = gradcheck.STATS
        print(f"gradscope: {stats.calls} gradcheck call(s) routed through gradscope: "
              f"{stats.passed} passed, {stats.failed} failed with an explanation",
              file=sys.stderr)


if __name__ == "__main__":
    main()
