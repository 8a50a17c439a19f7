"""Coverage-guided fuzzing of `gradscope run`'s config reading and of every output format with
hostile names.

    pip install atheris
    python fuzz/fuzz_config.py -max_total_time=60

Every input must end in check specifications or a UsageError (exit 2), never run user code
(a canary file would appear), and every output format must stay well-formed with the input as a
check's name and error text: JUnit parses as XML, markdown has no raw HTML outside code, the
terminal output has no escape character.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import xml.etree.ElementTree as ET

CANARY = os.path.join(tempfile.gettempdir(), "gradscope_fuzz_config_canary")


def one_input(data: bytes) -> None:
    from gradscope.errors import UsageError
    from gradscope.suite.config import load

    text = data.decode("utf-8", "replace")
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "gradscope.toml")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
        with contextlib.suppress(UsageError):
            load(__import__("pathlib").Path(path))
    if os.path.exists(CANARY):
        raise RuntimeError(f"canary touched by config {text!r}")
    _outputs(text)


def _outputs(name: str) -> None:
    from rich.console import Console

    from gradscope.render.suite import junit_xml, markdown, show
    from gradscope.suite.results import CheckResult, SuiteReport

    suite = SuiteReport(name, [CheckResult(name, name, "check", "error", 0.0, error=name)])
    ET.fromstring(junit_xml(suite))  # raises on malformed XML
    with open(os.devnull, "w") as sink:
        console = Console(width=100, record=True, color_system=None, file=sink)
        show(suite, console)
    if "\x1b" in console.export_text():
        raise RuntimeError(f"an escape character reached the terminal from {name!r}")
    fenced = False  # what stands inside a code fence is text, not markdown
    for line in markdown(suite).splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#") and "<" in line:
            raise RuntimeError(f"raw HTML in a markdown heading from {name!r}")


def main() -> None:
    try:
        import atheris
    except ImportError:
        sys.exit("atheris is not installed: pip install atheris")
    with atheris.instrument_imports():
        import gradscope.suite.config  # noqa: F401
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
