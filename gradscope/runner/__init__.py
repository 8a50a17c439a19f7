"""One run of check/jvp/jacobian: a list of stages, each a function from the earlier stages'
frozen values to a new frozen value —

    prepare → gather (Evidence) → excuse (Excuses) → judge (Verdict) → diagnose (Diagnoses)
            → assemble (Report)

— around which the run captures what the target prints (stdout may be the JSON document), draws
everything from the seed, and counts the target leaving through sys.exit as its failure.
"""

from __future__ import annotations

import io
import time
from contextlib import redirect_stdout
from dataclasses import replace

from gradscope.evidence.gather import gather
from gradscope.evidence.prepare import Prepared, prepare
from gradscope.inputs.bind import Bound
from gradscope.memory import released
from gradscope.options import Request
from gradscope.report.model import Report
from gradscope.rng import seeded
from gradscope.runner.assemble import assemble
from gradscope.runner.diagnoses import diagnose
from gradscope.runner.excuses import excuse
from gradscope.runner.judgement import judge
from gradscope.usercode import contained

MAX_USER_OUTPUT = 20_000  # characters of the target's own prints kept in a report


def run(request: Request) -> Report:
    """One check: where a run mode runs the whole check itself (in other processes too),
there; else here."""
    from gradscope import targets as registry
    from gradscope.targets.mode import running

    mode = running(registry.MODES, request.options)
    return _here(request) if mode is None else mode.run(request, _here)


def _here(request: Request) -> Report:
    """One check in this process, stage by stage."""
    printed = io.StringIO()
    started = time.perf_counter()
    with contained(), redirect_stdout(printed), seeded(request.options.seed):
        prepared = prepare(request)
        try:
            report = _stages(prepared)
            for draw in prepared.draws:  # (each other binding the check runs at too)
                report = _drawn(report, _stages(prepared.at(draw)), draw)
        finally:
            prepared.target.finished()  # (the user's objects left as they were found)
    timings = {**report.timings, "total": time.perf_counter() - started}
    if prepared.target.runs_user_code:  # every call of the user's code, features' included
        timings["calls.total"] = prepared.target.calls
    report = replace(report, timings={k: round(v, 6) for k, v in timings.items()})
    return _with_prints(report, printed.getvalue())


def _stages(prepared: Prepared) -> Report:
    """The stages after prepare, at the prepared binding."""
    evidence = gather(prepared, prepared.request.progress)
    released()  # (the evidence's temporaries handed back before the features' peaks;
    # excuse hands back after each feature itself)
    excuses = excuse(prepared, evidence)
    verdict = judge(prepared, evidence, excuses)
    diagnoses = diagnose(prepared, evidence, excuses, verdict)
    return assemble(prepared, evidence, excuses, verdict, diagnoses)


def _drawn(first: Report, other: Report, draw: Bound) -> Report:
    """The run's report over two draws of its inputs: the first's where it fails or both pass
    (said), the other's where only it fails — its header shows the draw that found it."""
    spread = "; ".join(f"{n}: {v.brief or v.origin}" for n, v in draw.values.items()
                       if v.chosen)
    timings = {k: first.timings.get(k, 0.0) + other.timings.get(k, 0.0)
               for k in {*first.timings, *other.timings}}
    if not first.passed:
        return first
    if other.passed:
        note = (f"the drawn inputs were narrowed for this report; the check also ran at the "
                f"default draw ({spread}) and passed there")
        return replace(first, notes=[*first.notes, note], timings=timings)
    note = ("the check at the narrowed draw passed; this report is the default draw's, which "
            "found the failure (a narrowed draw is added to the default spread, never "
            "substituted)")
    return replace(other, notes=[*other.notes, note], timings=timings)


def _with_prints(report: Report, printed: str) -> Report:
    """The target's own prints, kept in `user_output` and named in a note."""
    if not printed:
        return report
    lines = printed.splitlines()
    note = (f"the target printed {len(lines)} line(s) to stdout (kept out of the report, in "
            f"`user_output`): {' | '.join(lines[:3])[:200]}")
    return replace(report, user_output=printed[:MAX_USER_OUTPUT], notes=[*report.notes, note])


__all__ = ["Prepared", "prepare", "run", "seeded"]
