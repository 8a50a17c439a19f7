"""Coverage-guided fuzzing of everything that reads user text: expressions and VALUE strings.

    pip install atheris
    python fuzz/fuzz_parse.py -max_total_time=60      # bounded; any libFuzzer flag works

Every input must end in a result or a UsageError (exit 2); anything else — another exception,
a hang, a touched canary file — is a crash that atheris reports with the input that caused it.
`one_input` is importable without atheris (tests/test_fuzz.py runs it on a few inputs).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile

CANARY = os.path.join(tempfile.gettempdir(), "gradscope_fuzz_canary")


def one_input(data: bytes) -> None:
    from gradscope.errors import UsageError
    from gradscope.expr.parse import parse
    from gradscope.inputs.text import parse_value

    text = data.decode("utf-8", "replace")
    for reader in (parse, lambda t: parse_value(t, "--at x")):
        with contextlib.suppress(UsageError):
            reader(text)
    # If any reader ever evaluated text, an input such as open(CANARY, 'w') would create it.
    if os.path.exists(CANARY):
        raise RuntimeError(f"canary touched by input {text!r}")


def main() -> None:
    try:
        import atheris
    except ImportError:
        sys.exit("atheris is not installed: pip install atheris")
    with atheris.instrument_imports():
        import gradscope.expr.parse  # imported here to be instrumented
        import gradscope.inputs.text  # noqa: F401
    argv = list(sys.argv)
    if not any(a.startswith("-max_total_time") or a.startswith("-runs") for a in argv):
        argv.append("-max_total_time=60")  # bounded unless told otherwise
    atheris.Setup(argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
