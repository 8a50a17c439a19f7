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


def test_a_fifo_is_written_through_never_replaced(tmp_path):
    import os
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    write_atomic(fifo, "through")
    reader.join(5)
    assert got == ["through"] and fifo.is_fifo()


def test_a_symlink_is_written_through_and_kept(tmp_path):
    target = tmp_path / "real.json"
    link = tmp_path / "link.json"
    link.symlink_to(target)  # dangling until written
    check_output(link)
    write_atomic(link, "data")
    assert link.is_symlink() and target.read_text() == "data"


def test_devices_are_written_through():
    from pathlib import Path

    null = Path("/dev/null")
    check_output(null)
    write_atomic(null, "discarded")
    assert null.is_char_device()


def test_an_over_long_name_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="File name too long"):
        check_output(tmp_path / ("a" * 300))


def test_reports_get_the_umask_permissions_not_0600(tmp_path):
    import os

    old = os.umask(0o022)
    try:
        write_atomic(tmp_path / "r.txt", "x")
    finally:
        os.umask(old)
    assert (tmp_path / "r.txt").stat().st_mode & 0o777 == 0o644


def test_an_interrupted_write_leaves_no_temporary(tmp_path, monkeypatch):
    import os

    def stopped(*args):
        raise SystemExit(143)  # what SIGTERM becomes (gradscope._launch)

    monkeypatch.setattr(os, "replace", stopped)
    with pytest.raises(SystemExit):
        write_atomic(tmp_path / "r.json", "half")
    assert list(tmp_path.iterdir()) == []


def test_a_fifo_nobody_reads_is_refused_before_any_work_never_waited_on(tmp_path):
    import os
    import time

    fifo = tmp_path / "report.json"
    os.mkfifo(fifo)
    tic = time.perf_counter()
    with pytest.raises(UsageError, match="is a FIFO that nobody reads"):
        check_output(fifo, "--junit-xml")
    assert time.perf_counter() - tic < 10


def test_a_fifo_whose_reader_waits_gets_the_report_and_the_reader_keeps_its_input(tmp_path):
    import os
    import threading

    fifo = tmp_path / "report.json"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    check_output(fifo)  # (the writing end is held from here: the reader sees no early EOF)
    write_file(fifo, "the report", "--output")
    reader.join(10)
    assert got == ["the report"]


def test_a_fifo_whose_reader_left_keeps_the_report_beside(tmp_path, monkeypatch):
    import os

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("gradscope.cli.output.READER_GRACE", 0.0)
    fifo = tmp_path / "summary.md"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match=r"written to .*summary\.md\.gradscope instead"):
        write_file(fifo, "kept", "--summary")
    assert (tmp_path / "summary.md.gradscope").read_text() == "kept"


def test_run_refuses_a_fifo_for_its_junit_xml_at_once(tmp_path, capsys):
    import os

    from tests.command import run

    fifo = tmp_path / "j.xml"
    os.mkfifo(fifo)
    code, _, err = run(capsys, "run", "--junit-xml", str(fifo))
    assert code == 2 and "is a FIFO that nobody reads" in err


def test_json_asked_and_an_error_is_one_json_document_saying_so(capsys, tmp_path):
    import json

    from tests.command import run
    from tests.paths import DATA

    code, out, err = run(capsys, "check", "nope.py:f", "--json")
    document = json.loads(out)
    assert code == 2 and document["schema"] == "gradscope.error/1"
    assert document["exit_code"] == 2 and "no such file" in document["error"]
    assert "gradscope: error:" in err  # (the one line on stderr, as ever)
    code, out, _ = run(capsys, "check", f"{DATA}/targets.py:forward_raises", "--format",
                       "json")
    document = json.loads(out)
    assert code == 3 and document["exit_code"] == 3 and document["during"] == "forward"
    assert document["exception"] and any("targets.py" in f for f in document["frames"])
    code, out, _ = run(capsys, "check", "x*2", "--json", "--max-elements", "abc")
    assert code == 2 and "--max-elements" in json.loads(out)["error"]
    written = tmp_path / "r.json"
    code, out, _ = run(capsys, "check", "nope.py:f", "--json", "--output", str(written))
    assert code == 2 and out == "" and json.loads(written.read_text())["exit_code"] == 2
