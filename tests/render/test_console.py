"""Where rich output goes: a terminal's width or a pipe's, and plain text recorded without
colour or padding."""

from __future__ import annotations

from rich.table import Table

from gradscope.render.console import PIPE_WIDTH, record, terminal_console


def test_a_pipe_without_columns_is_wide(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    console = terminal_console()
    assert not console.is_terminal and console.width == PIPE_WIDTH
    monkeypatch.setenv("COLUMNS", "77")
    assert terminal_console().width == 77


def test_recorded_text_has_no_colour_and_no_trailing_spaces():
    def draw(console):
        table = Table("a", "b")
        table.add_row("[bold red]x[/]", "1")
        console.print(table)
        console.print("[green]done[/]")

    text = record(draw, width=40)
    assert "\x1b[" not in text and "done" in text and "x" in text
    assert all(line == line.rstrip() for line in text.splitlines())
