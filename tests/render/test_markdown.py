"""Markdown for step summaries and PR comments: the verdict in the heading, a table per input, the
checks, the diagnostics."""

from __future__ import annotations

import gradscope


def test_markdown_marks_problems():
    md = gradscope.check("abs(x)", x="0,1").to_markdown()
    assert "**nondifferentiable**" in md and "### Diagnostics" in md
