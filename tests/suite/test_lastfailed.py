"""The record behind `gradscope run --lf`: what did not pass, per config, kept beside it."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from gradscope.suite import lastfailed


def _results(**outcomes):
    return [SimpleNamespace(name=n, outcome=o) for n, o in outcomes.items()]


def test_a_whole_run_replaces_the_record_and_a_partial_one_updates_it(tmp_path):
    config = tmp_path / "pyproject.toml"
    config.write_text("")
    assert lastfailed.failed(config)[0] is None
    lastfailed.record(config, _results(a="failed", b="passed", c="raised"), ran_all=True)
    assert lastfailed.failed(config)[0] == {"a", "c"}
    lastfailed.record(config, _results(a="passed"), ran_all=False)  # -k a: c is still known
    assert lastfailed.failed(config)[0] == {"c"}
    lastfailed.record(config, _results(b="passed"), ran_all=True)
    assert lastfailed.failed(config)[0] == set()


def test_a_cache_that_cannot_be_written_or_read_changes_nothing(tmp_path):
    config = tmp_path / "pyproject.toml"
    config.write_text("")
    (tmp_path / lastfailed.CACHE).write_text("a file where the folder would be")
    lastfailed.record(config, _results(a="failed"), ran_all=True)  # no error
    assert lastfailed.failed(config)[0] is None
    (tmp_path / lastfailed.CACHE).unlink()
    (tmp_path / lastfailed.CACHE).mkdir()
    (tmp_path / lastfailed.CACHE / lastfailed.FILE).write_text("{not json")
    assert lastfailed.failed(config)[0] is None


def _cache(tmp_path):
    config = tmp_path / "pyproject.toml"
    config.write_text("")
    folder = tmp_path / lastfailed.CACHE
    folder.mkdir()
    return config, folder / lastfailed.FILE


def test_a_fifo_is_never_read_or_waited_on(tmp_path):
    config, cache = _cache(tmp_path)
    os.mkfifo(cache)
    names, note = lastfailed.failed(config)  # (would block forever if opened for reading)
    assert names is None and "not a regular file" in note
    lastfailed.record(config, _results(a="failed"), ran_all=True)  # replaced, not written to
    assert lastfailed.failed(config)[0] == {"a"}


@pytest.mark.parametrize("make", ["deep", "huge", "zero"])
def test_a_cache_too_deep_or_too_large_is_ignored_with_a_note(tmp_path, make):
    config, cache = _cache(tmp_path)
    if make == "deep":
        cache.write_text("[" * 100_000 + "]" * 100_000)
    elif make == "huge":
        with open(cache, "wb") as handle:  # sparse: 6 GB on paper, nothing on disk
            handle.truncate(6 << 30)
    else:
        cache.symlink_to("/dev/zero")
    names, note = lastfailed.failed(config)
    assert names is None and note.startswith("--lf: ignored")


def test_the_cache_is_never_written_through_a_symlink(tmp_path):
    config, cache = _cache(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    cache.symlink_to(victim)
    lastfailed.record(config, _results(a="failed"), ran_all=True)
    assert victim.read_text() == "precious" and not cache.is_symlink()
    assert lastfailed.failed(config)[0] == {"a"}


def test_a_dangling_gitignore_link_creates_nothing_outside(tmp_path):
    config, cache = _cache(tmp_path)
    outside = tmp_path / "elsewhere" / "created"
    (outside.parent).mkdir()
    (cache.parent / ".gitignore").symlink_to(outside)
    lastfailed.record(config, _results(a="failed"), ran_all=True)
    assert not outside.exists() and lastfailed.failed(config)[0] == {"a"}


def test_a_symlinked_cache_folder_is_not_written(tmp_path):
    config = tmp_path / "pyproject.toml"
    config.write_text("")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / lastfailed.CACHE).symlink_to(elsewhere)
    note = lastfailed.record(config, _results(a="failed"), ran_all=True)
    assert "not updated" in note and list(elsewhere.iterdir()) == []


@pytest.mark.slow
def test_a_run_with_a_fifo_cache_finishes_and_says_so(tmp_path, capsys, monkeypatch):
    from tests.command import run

    monkeypatch.chdir(tmp_path)
    config = tmp_path / "gradscope.toml"
    config.write_text('[tool.gradscope]\n[[tool.gradscope.checks]]\nname = "sq"\n'
                      'target = "x**2"\n')
    (tmp_path / lastfailed.CACHE).mkdir()
    os.mkfifo(tmp_path / lastfailed.CACHE / lastfailed.FILE)
    code, out, _ = run(capsys, "run", str(config), "--lf")
    assert code == 0 and "not a regular file" in out
    code, out, _ = run(capsys, "run", str(config), "--co", "--lf")
    assert code == 0 and "sq" in out
