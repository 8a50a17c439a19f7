"""`gradscope run`: every configured check (or a selection, or one shard of them), each in a
worker process by default, one summary and one exit code (see suite/results.py). One check
failing, raising, crashing or hanging never stops the others; results come in config order."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from gradscope.errors import NothingSelected, UsageError
from gradscope.options import FAIL_ON
from gradscope.suite import lastfailed
from gradscope.suite.config import (
    MAX_MEMORY_MB,
    MIN_MEMORY_MB,
    CheckSpec,
    check_number,
    load,
    read,
    refuse,
)
from gradscope.suite.results import CheckResult, SuiteReport, run_one
from gradscope.suite.workers import DEFAULT_TIMEOUT, Job, Pool, in_order


def select(specs: list[CheckSpec], pattern: str | None) -> list[CheckSpec]:
    """The checks whose name matches `pattern` (a glob, or a substring without wildcards)."""
    if not pattern:
        return specs
    wild = any(c in pattern for c in "*?[")
    chosen = [s for s in specs if (fnmatch.fnmatchcase(s.name, pattern) if wild
                                   else pattern in s.name)]
    if not chosen:
        raise NothingSelected(f"-k {pattern!r} matches none of the {len(specs)} check(s): "
                              + ", ".join(s.name for s in specs[:10]))
    return chosen


def rerun(specs: list[CheckSpec], config: Path, last_failed: bool) -> tuple[list[CheckSpec],
                                                                             str]:
    """--lf: the checks that did not pass in the last recorded run (all of them, and a note
    saying so, where none is recorded or every one passed)."""
    if not last_failed:
        return specs, ""
    names, ignored = lastfailed.failed(config)
    if names is None:
        return specs, ignored + ("; " if ignored else "") + \
            "--lf: no earlier run of this config is recorded; running every check"
    chosen = [s for s in specs if s.name in names]
    if not chosen:
        return specs, "--lf: every check passed last time; running them all"
    return chosen, f"--lf: rerunning the {len(chosen)} check(s) that did not pass last time"


def selected(specs: list[CheckSpec], config: Path, *, pattern: str | None = None,
             shard_of: str | None = None, last_failed: bool = False,
             fail_on: str | None = None) -> tuple[list[CheckSpec], str]:
    """The checks a run runs (-k, --lf, --shard; none: NothingSelected, exit 5), with
    `fail_on` set for all of them when given, and a note on the --lf choice."""
    specs, note = rerun(select(specs, pattern), config, last_failed)
    specs = shard(specs, shard_of)
    if not specs:
        raise NothingSelected(f"--shard {shard_of}: this share of the checks is empty")
    if fail_on is not None:
        if fail_on not in FAIL_ON:
            raise UsageError(f"unknown --fail-on {fail_on!r}; allowed: {', '.join(FAIL_ON)}")
        specs = [replace(spec, request=replace(
            spec.request, options=spec.request.options.updated(fail_on=fail_on)))
            for spec in specs]
    return specs, note


def shard(specs: list[CheckSpec], text: str | None) -> list[CheckSpec]:
    """Shard I of N (`--shard I/N`, 1-based): every N-th check from the I-th, so N CI
    machines together run each check once."""
    if not text:
        return specs
    try:
        i, n = (int(p) for p in text.split("/"))
    except ValueError:
        raise UsageError(f"--shard {text!r}: expected I/N such as 2/4") from None
    if not 1 <= i <= n:
        raise UsageError(f"--shard {text}: I must be between 1 and N")
    return specs[i - 1::n]


def memory_limit(specs: list[CheckSpec], given: int | None) -> int | None:
    """The worker memory limit: the one given (--memory-limit), else the config's (refused
    before any worker starts where no system could set it)."""
    limit = given or next((s.memory_mb for s in specs if s.memory_mb), None)
    if limit is not None and not MIN_MEMORY_MB <= limit <= MAX_MEMORY_MB:
        raise UsageError(f"`memory_limit` is in megabytes, from {MIN_MEMORY_MB} to "
                         f"{MAX_MEMORY_MB}; got {limit}")
    return limit


def run_checks(specs: list[CheckSpec], config: str,
               on_result: Callable[[CheckResult], None] | None = None, *,
               jobs: int | None = None, isolate: bool = True,
               timeout: float | None = None, memory_mb: int | None = None,
               pool: Pool | None = None, exitfirst: bool = False) -> SuiteReport:
    """Run `specs`: in `jobs` worker processes (default: one per CPU; or in `pool`, started
    early), or in this process with `isolate=False` (no protection from code that exits,
    crashes or hangs). `exitfirst` (-x): stop at the first check, in config order, that does
    not pass; the checks after it are `not_run` (workers still busy are stopped)."""
    suite = SuiteReport(config)
    stop = (lambda r: r.outcome != "passed") if exitfirst else None
    if not isolate:
        for spec in specs:
            suite.results.append(run_one(spec))
            if on_result is not None:
                on_result(suite.results[-1])
            if stop is not None and stop(suite.results[-1]):
                break
    else:
        work = [Job(k, spec, spec.timeout or timeout or DEFAULT_TIMEOUT)
                for k, spec in enumerate(specs)]
        pool = pool or Pool(workers_for(jobs, len(specs)), memory_mb)
        suite.results = in_order(pool.run(work), len(work), on_result, stop)
    suite.not_run = [s.name for s in specs[len(suite.results):]]
    return suite


def _selection(specs: list[CheckSpec], where: Path, errors: list[str],
               chosen: dict) -> tuple[list[CheckSpec], str]:
    """The selection, for sizing the pool before the config is known to be right (an empty
    one is said after the config's own errors)."""
    try:
        return selected(specs, where, **chosen)
    except NothingSelected:
        if errors:
            return [], ""
        raise


def settings(spec: CheckSpec) -> dict[str, Any]:
    """A check's options that differ from the defaults (what --show-config prints), with its
    run keys (timeout, memory limit) where set."""
    from dataclasses import fields

    from gradscope.options import DEFAULTS

    options = spec.request.options
    out = {f.name: getattr(options, f.name) for f in fields(options)
           if f.name != "owned" and getattr(options, f.name) != getattr(DEFAULTS, f.name)}
    out.update(options.owned)  # (the options features own: only those given are there)
    out.update({k: v for k, v in (("timeout", spec.timeout), ("memory_limit", spec.memory_mb))
                if v is not None})
    return out


def collect(path: str | Path | None = None, *, pattern: str | None = None,
            shard_of: str | None = None, last_failed: bool = False
            ) -> tuple[list[CheckSpec], Path, str]:
    """The checks a run would run (`--co`), from the config's keys and types (no torch, no
    worker): (checks, config, the --lf note)."""
    specs, where, errors = read(Path(path) if path is not None else None)
    refuse(where, sorted(errors, key=check_number))
    specs, note = selected(specs, where, pattern=pattern, shard_of=shard_of,
                           last_failed=last_failed)
    return specs, where, note


def run_config(path: str | Path | None = None,
               on_result: Callable[[CheckResult], None] | None = None, *,
               pattern: str | None = None, shard_of: str | None = None,
               jobs: int | None = None, isolate: bool = True, timeout: float | None = None,
               memory_mb: int | None = None,
               on_count: Callable[[int], None] | None = None, exitfirst: bool = False,
               last_failed: bool = False, fail_on: str | None = None) -> SuiteReport:
    """Load and run a config (pyproject.toml by default); returns the SuiteReport. Config errors
    raise UsageError before any check runs; a selection of nothing raises NothingSelected
    (exit 5). `on_count` hears how many checks will run. `exitfirst` (-x), `last_failed`
    (--lf: what did not pass last time, recorded beside the config) and `fail_on` (for every
    check) are pytest's and ruff's everyday choices.

    Isolated, this process reads the config's keys and types (without torch) first, then
    starts the workers it needs (never more than the checks, nor than the cores: `--jobs 1000`
    with one check starts one), and a worker validates the rest (VALUEs, expressions, input
    names)."""
    where = Path(path) if path is not None else None
    chosen = {"pattern": pattern, "shard_of": shard_of, "last_failed": last_failed,
              "fail_on": fail_on}
    if not isolate:
        specs, where = load(where)
        everything = len(specs)
        specs, note = selected(specs, where, **chosen)
        if on_count is not None:
            on_count(len(specs))
        suite = run_checks(specs, str(where), on_result, isolate=False, exitfirst=exitfirst)
    else:
        specs, where, errors = read(where)
        everything = len(specs)
        # every check is validated (a broken config is refused whatever is selected), with
        # no more workers than the selection will use
        chosen_specs, note = _selection(specs, where, errors, chosen)
        pool = Pool(workers_for(jobs, len(chosen_specs) or 1),
                    memory_limit(specs, memory_mb)).warm()
        try:
            refuse(where, sorted(errors + pool.validate(specs), key=check_number))
            specs = chosen_specs  # (a config with errors was refused: the selection stands)
            if on_count is not None:
                on_count(len(specs))
            suite = run_checks(specs, str(where), on_result, timeout=timeout, pool=pool,
                               exitfirst=exitfirst)
        finally:
            pool.close()
    unrecorded = lastfailed.record(where, suite.results,
                                   ran_all=len(suite.results) == everything)
    suite.notes = [n for n in (note, unrecorded) if n]
    return suite


def workers_for(jobs: int | None, checks: int) -> int:
    """Worker processes for `checks` checks: `jobs` (default: one per core), never more than
    the cores or the checks, at least one (it validates the config)."""
    cores = os.cpu_count() or 1
    return max(1, min(jobs or cores, cores, checks))
