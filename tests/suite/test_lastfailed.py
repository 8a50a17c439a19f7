"""The record behind `gradscope run --lf`: what did not pass, per config, kept beside it."""

from __future__ import annotations

from types import SimpleNamespace

from gradscope.suite import lastfailed


def _results(**outcomes):
    return [SimpleNamespace(name=n, outcome=o) for n, o in outcomes.items()]


def test_a_whole_run_replaces_the_record_and_a_partial_one_updates_it(tmp_path):
    config = tmp_path / "pyproject.toml"
    config.write_text("")
    assert lastfailed.failed(config) is None
    lastfailed.record(config, _results(a="failed", b="passed", c="raised"), ran_all=True)
    assert lastfailed.failed(config) == {"a", "c"}
    lastfailed.record(config, _results(a="passed"), ran_all=False)  # -k a: c is still known
    assert lastfailed.failed(config) == {"c"}
    lastfailed.record(config, _results(b="passed"), ran_all=True)
    assert lastfailed.failed(config) == set()


def test_a_cache_that_cannot_be_written_or_read_changes_nothing(tmp_path):
    config = tmp_path / "pyproject.toml"
    config.write_text("")
    (tmp_path / lastfailed.CACHE).write_text("a file where the folder would be")
    lastfailed.record(config, _results(a="failed"), ran_all=True)  # no error
    assert lastfailed.failed(config) is None
    (tmp_path / lastfailed.CACHE).unlink()
    (tmp_path / lastfailed.CACHE).mkdir()
    (tmp_path / lastfailed.CACHE / lastfailed.FILE).write_text("{not json")
    assert lastfailed.failed(config) is None
