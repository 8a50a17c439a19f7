"""`gradscope run`: every configured check (or a selection, or one shard of them), each in a
worker process by default, one summary and one exit code (see tools/results.py). One check
failing, raising, crashing or hanging never stops the others; results come in config order."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable
from pathlib import Path

from gradscope.errors import UsageError
from gradscope.suite.config import CheckSpec, check_number, load, read, refuse
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
        raise UsageError(f"-k {pattern!r} matches none of the {len(specs)} check(s): "
                         + ", ".join(s.name for s in specs[:10]))
    return chosen


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
    """The worker memory limit: the one given (--memory-limit), else the config's."""
    return given or next((s.memory_mb for s in specs if s.memory_mb), None)


def run_checks(specs: list[CheckSpec], config: str,
               on_result: Callable[[CheckResult], None] | None = None, *,
               jobs: int | None = None, isolate: bool = True,
               timeout: float | None = None, memory_mb: int | None = None,
               pool: Pool | None = None) -> SuiteReport:
    """Run `specs`: in `jobs` worker processes (default: one per CPU; or in `pool`, started
    early), or in this process with `isolate=False` (no protection from code that exits,
    crashes or hangs)."""
    suite = SuiteReport(config)
    if not isolate:
        for spec in specs:
            suite.results.append(run_one(spec))
            if on_result is not None:
                on_result(suite.results[-1])
        return suite
    work = [Job(k, spec, spec.timeout or timeout or DEFAULT_TIMEOUT)
            for k, spec in enumerate(specs)]
    pool = pool or Pool(workers_for(jobs, len(specs)), memory_mb)
    suite.results = in_order(pool.run(work), len(work), on_result)
    return suite


def run_config(path: str | Path | None = None,
               on_result: Callable[[CheckResult], None] | None = None, *,
               pattern: str | None = None, shard_of: str | None = None,
               jobs: int | None = None, isolate: bool = True, timeout: float | None = None,
               memory_mb: int | None = None,
               on_count: Callable[[int], None] | None = None) -> SuiteReport:
    """Load and run a config (pyproject.toml by default); returns the SuiteReport. Config errors
    raise UsageError before any check runs. `on_count` hears how many checks will run.

    Isolated, this process reads the config's keys and types (without torch) first, then
    starts the workers it needs (never more than the checks, nor than the cores: `--jobs 1000`
    with one check starts one), and a worker validates the rest (VALUEs, expressions, input
    names)."""
    where = Path(path) if path is not None else None
    if not isolate:
        specs, where = load(where)
        specs = shard(select(specs, pattern), shard_of)
        if on_count is not None:
            on_count(len(specs))
        return run_checks(specs, str(where), on_result, isolate=False)
    specs, where, errors = read(where)
    specs = shard(select(specs, pattern), shard_of)
    pool = Pool(workers_for(jobs, len(specs)), memory_limit(specs, memory_mb)).warm()
    try:
        refuse(where, sorted(errors + pool.validate(specs), key=check_number))
        if on_count is not None:
            on_count(len(specs))
        return run_checks(specs, str(where), on_result, timeout=timeout, pool=pool)
    finally:
        pool.close()


def workers_for(jobs: int | None, checks: int) -> int:
    """Worker processes for `checks` checks: `jobs` (default: one per core), never more than
    the cores or the checks, at least one (it validates the config)."""
    cores = os.cpu_count() or 1
    return max(1, min(jobs or cores, cores, checks))
