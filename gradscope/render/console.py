"""Where rich output goes: the terminal (stdout, tolerant of a reader that leaves early) or
plain text recorded at a fixed width (files, assertion messages, JUnit)."""

from __future__ import annotations

import io
import os
from collections.abc import Callable

from rich.console import Console


class _StdoutConsole(Console):
    def on_broken_pipe(self) -> None:
        # rich's default exits with 1, which gradscope's exit codes reserve for a failed check;
        # the caller decides (see cli._reader_may_leave)
        self.quiet = True
        raise BrokenPipeError


PIPE_WIDTH = 120  # a pipe or log file without COLUMNS: wide rather than rich's 80


def terminal_console() -> Console:
    """stdout. Its width is rich's own detection (the terminal's, or COLUMNS); a pipe or log
    file without COLUMNS gets PIPE_WIDTH columns."""
    console = _StdoutConsole(highlight=False)
    if not console.is_terminal and not os.environ.get("COLUMNS", "").strip().isdigit():
        console.width = PIPE_WIDTH
    return console


def record(draw: Callable[[Console], None], width: int = PIPE_WIDTH) -> str:
    """What `draw` prints, as plain text (no colour) at `width` columns, without the spaces
    rich pads lines with."""
    console = Console(file=io.StringIO(), width=width, color_system=None, force_terminal=False,
                      record=True)
    draw(console)
    return "\n".join(line.rstrip() for line in console.export_text().split("\n"))


def html(draw: Callable[[Console], None], width: int = PIPE_WIDTH) -> str:
    """What `draw` prints, as HTML with its colours (a notebook cell's display): inline
    styles, one <pre> block, nothing fetched from anywhere."""
    console = Console(file=io.StringIO(), width=width, record=True, force_jupyter=False,
                      force_terminal=True, color_system="truecolor")
    draw(console)
    return console.export_html(inline_styles=True, code_format="<pre style=\"font-family:"
                               "Menlo,'DejaVu Sans Mono',consolas,monospace;font-size:12px\">"
                               "{code}</pre>")
