"""Where reports go: atomic files, refused paths, one line saying where."""

from __future__ import annotations

import pytest

import gradscope
from gradscope.cli.output import check_output, emit, write_atomic, write_file
from gradscope.errors import UsageError


def test_write_atomic_replaces_the_whole_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "r.json"
    path.write_text("old")
    write_atomic(path, "new")
    assert path.read_text() == "new" and [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_unwritable_outputs_are_refused_before_any_work(tmp_path):
    with pytest.raises(UsageError, match="is a folder"):
        check_output(tmp_path)
    with pytest.raises(UsageError, match="does not exist"):
        check_output(tmp_path / "no" / "r.json", "--junit-xml")
    with pytest.raises(UsageError, match="cannot write --dot"):
        write_file(tmp_path / "no" / "g.dot", "x", "--dot")


def test_emit_writes_the_format_and_says_where(tmp_path, capsys):
    report = gradscope.check("x * 2", x="1,2")
    emit(report, "json", tmp_path / "r.json", "written there")
    assert '"schema": "gradscope.report/1"' in (tmp_path / "r.json").read_text()
    captured = capsys.readouterr()
    assert captured.out == "" and "written there" in captured.err  # stdout stays JSON-clean
    emit(report, "markdown", None, "unused")
    assert "x" in capsys.readouterr().out
