"""Where rich output goes: the terminal (stdout, tolerant of a reader that leaves early) or
plain text recorded at a fixed width (files, assertion messages, JUnit).

Every console gradscope makes is a `SafeConsole`: text is never read as rich markup (a class
or file named `[link=...]` stays those characters, in the terminal and in a notebook's HTML)
and control characters in what is shown (an escape sequence in a check's or a class's name)
are spelled out, whichever renderable carries them."""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterable
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment

from gradscope.render.cells import printable


class SafeConsole(Console):
    """A console that shows text as it is: no markup, no control characters (rich's own
    control segments, a progress bar's cursor moves, pass as they are)."""

    def __init__(self, **kwargs: Any) -> None:
        # rich's own default finds a notebook and *displays* what is printed; gradscope's
        # consoles record or write to a stream, and a cell shows the one report it returns
        super().__init__(**{"force_jupyter": False, **kwargs, "markup": False})

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None
               ) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            if segment.control or segment.text.isprintable() or ("\n" in segment.text and \
                    segment.text.replace("\n", "").isprintable()):
                yield segment
            else:
                yield Segment(printable(segment.text), segment.style, segment.control)


def safe_render(renderable: RenderableType, options: ConsoleOptions) -> Iterable[Segment]:
    """`renderable` as segments drawn by a safe console for `options` (a report shown by a
    console that is not gradscope's own, whose markup would read user text)."""
    return SafeConsole(width=options.max_width, color_system="truecolor").render(
        renderable, options)


class _StdoutConsole(SafeConsole):
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
    console = SafeConsole(file=io.StringIO(), width=width, color_system=None,
                          force_terminal=False, record=True)
    draw(console)
    return "\n".join(line.rstrip() for line in console.export_text().split("\n"))


def html(draw: Callable[[Console], None], width: int = PIPE_WIDTH) -> str:
    """What `draw` prints, as HTML with its colours (a notebook cell's display): inline
    styles, one <pre> block, nothing fetched from anywhere."""
    console = SafeConsole(file=io.StringIO(), width=width, record=True,
                          force_terminal=True, color_system="truecolor")
    draw(console)
    return console.export_html(inline_styles=True, code_format="<pre style=\"font-family:"
                               "Menlo,'DejaVu Sans Mono',consolas,monospace;font-size:12px\">"
                               "{code}</pre>")
