"""One run of check/jvp/jacobian: bind → engines → judge → diagnose → report, in that order.

Each step is a function elsewhere that returns a typed result (runner/engines.py,
runner/tables.py, runner/diagnoses.py, verdict/, diagnose/); this module only wires them.
"""

from __future__ import annotations

import io
import random
import time
from contextlib import contextmanager, redirect_stdout
from typing import Any

import torch

from gradscope._version import __version__
from gradscope.diagnose.layers import quiet_layers
from gradscope.errors import TargetError, UsageError
from gradscope.inputs.bind import DTYPES, Bound, bind, defaulted, device_of, grad_value
from gradscope.options import Request
from gradscope.report import build
from gradscope.report.model import Report
from gradscope.report.modules import MODEL_TENSORS, rollup
from gradscope.runner import diagnoses, engines, tables
from gradscope.targets import ExpressionTarget, SecondOrderTarget, resolve
from gradscope.targets.python import contained
from gradscope.tensors import all_finite
from gradscope.verdict import outcome
from gradscope.verdict.judge import Judge
from gradscope.verdict.tolerance import Tolerance

MAX_USER_OUTPUT = 20_000  # characters of the target's own prints kept in a report


def prepare(request: Request) -> tuple[Any, Bound]:
    """The target (wrapped for --order 2) and its bound inputs: the first steps of every
    command (run, graph, sweep)."""
    options = request.options.validate()
    target = resolve(request.target, args=options.arg, init=options.init, base=request.base,
                     positional=request.positional)
    convert = getattr(target, "convert", None)
    if convert is not None:  # a module in another dtype: checked on a converted copy
        convert(DTYPES[options.dtype], device_of(options.device))
    set_mode = getattr(target, "set_mode", None)
    if set_mode is not None:
        set_mode(options.mode)
    if options.order == 2:
        # --grad is the inner upstream; the outer one, whose VJP is checked, is ones
        inner = grad_value(options)
        target = SecondOrderTarget(target, inner.tensor if inner is not None else None)
        options = options.updated(grad=None)
    if options.output_index is not None and options.output_key is not None:
        raise UsageError("--output-index and --output-key both pick the output: give one")
    choice = options.output_index if options.output_index is not None else options.output_key
    if choice is not None:
        if not hasattr(target, "output"):
            raise UsageError("--output-index/--output-key pick among the outputs of Python "
                             "code; an expression has one output")
        target.output = choice
    bound = bind(options, target)
    with shape_hint(bound):
        _bound_intermediates(target, bound, options.max_elements_total)
    return target, bound


SHAPE_WORDS = ("shape", "size", "dimension", "broadcast", "mat1 and mat2", "expected input")


@contextmanager
def shape_hint(bound: Bound):
    """A shape error while inputs had the default shape names them: the user did not choose
    (3,), and the error would otherwise blame their code or their expression."""
    try:
        yield
    except (UsageError, TargetError) as exc:
        names = defaulted(bound)
        text = str(exc)
        if not names or not any(w in text.lower() for w in SHAPE_WORDS):
            raise
        given = ", ".join(f"{n} had {tuple(bound.cast[n].shape)}" for n in names)
        how = " ".join(f"--shape {n}=…" for n in names)
        hint = (f"\nhint: the default shape was used, nobody's choice ({given}); "
                f"pass {how} (or --at)")
        raise type(exc)(text + hint) from exc


def _bound_intermediates(target: Any, bound: Bound, limit: int) -> None:
    """Outputs and intermediates are bounded like inputs, before anything is computed: a
    broadcast (8000×1 + 1×8000) or an outer product can make far more than it is given."""
    if not isinstance(target, ExpressionTarget):
        return
    count, where, shape = target.largest({n: tuple(t.shape) for n, t in bound.cast.items()})
    if count > limit:
        raise UsageError(f"`{where}` would make {count:,} elements (shape {shape}) from these "
                         f"inputs; outputs and intermediates are limited like inputs to "
                         f"{limit:,} (--max-elements-total)")


def run(request: Request) -> Report:
    """One check. The target's own prints are captured into the report (stdout may be the
    JSON document), and its leaving through sys.exit is a TargetError, never an exit."""
    printed = io.StringIO()
    with contained(), redirect_stdout(printed), seeded(request.options.seed):
        report = _run(request)
    if printed.getvalue():
        report.user_output = printed.getvalue()[:MAX_USER_OUTPUT]
        lines = printed.getvalue().splitlines()
        report.notes.append(f"the target printed {len(lines)} line(s) to stdout (kept out of "
                            f"the report, in `user_output`): {' | '.join(lines[:3])[:200]}")
    return report


@contextmanager
def seeded(seed: int):
    """Everything gradscope creates or calls draws from `seed`: module construction, the
    user's code using torch's or Python's global generator; both are restored afterwards, so
    a check neither depends on nor changes the caller's random state."""
    state = random.getstate()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        random.seed(seed)
        try:
            yield
        finally:
            random.setstate(state)


def _run(request: Request) -> Report:
    started = time.perf_counter()
    target, bound = prepare(request)  # validates the options first
    options = request.options
    timings: dict[str, float] = {}
    with _timed(timings, "autograd"), shape_hint(bound):
        backward = engines.autograd(target, bound, options.intermediates)
        engines.deterministic(target, bound, backward.engine.output)
        learn = getattr(target, "learn_graph", None)
        if learn is not None:  # which custom Functions finite differences must evaluate
            learn(backward.engine.output)
    with _timed(timings, "symbolic"):
        symbolic = engines.symbolic(target, bound.exact, backward.upstream)
    computed = engines.computed_in(bound, backward)
    with _timed(timings, "finite_difference"):
        differences = engines.finite_differences(target, bound, options, request.progress,
                                                 computed)
    tol = Tolerance.for_dtype(str(computed).removeprefix("torch."), options.rtol, options.atol)
    judge = Judge(target.names, backward.engine, symbolic.engine, differences.fd,
                  differences.estimates, tol, options.seed)
    refs = tables.References(symbolic.grads, symbolic.skipped, differences.skipped,
                             tables.formulas(symbolic.engine, target.names))
    report = _header(request, target, bound, backward, differences, tol, computed)
    if backward.grads is None:
        diagnoses.failed_backward(report, judge, bound, refs, backward)
    else:
        diagnoses.judged(report, request.command, target, judge, bound, options, refs, backward)
    if symbolic.engine is None and symbolic.skipped:
        report.notes.append(f"symbolic engine skipped: {symbolic.skipped}")
    for name, reason in differences.skipped.items():
        report.notes.append(f"finite differences skipped for {name}: {reason}")
    report.nonfinite = _nonfinite(backward)
    report.allow_nan = options.allow_nan
    roles = target.roles()
    for item in report.inputs:
        item.role = roles.get(item.name, "input")
    if len(report.inputs) > MODEL_TENSORS or any(i.role == "parameter" for i in report.inputs):
        report.modules = rollup(report.inputs)
        report.diagnostics.extend(quiet_layers(report.inputs))
    report.passed = outcome.passed(report)
    timings["total"] = time.perf_counter() - started
    report.timings = {k: round(v, 6) for k, v in timings.items()}
    return report


def _header(request: Request, target: Any, bound: Bound, backward: engines.Backward,
            differences: engines.Differences, tol: Tolerance, computed: torch.dtype) -> Report:
    options = request.options
    limit = options.max_elements, options.full
    return Report(
        command=request.command, target=target.text, target_kind=target.target_kind,
        dtype=options.dtype, passed=True, version=__version__,
        output=build.summary(backward.engine.output, *limit),
        upstream=build.summary(backward.upstream, *limit), inputs=[], diagnostics=[],
        device=str(bound.device), seed=options.seed, fail_on=options.fail_on,
        notes=[*target.notes, *_guessed(target, options), *_mode_note(target, options),
               *engines.precision_note(bound, computed),
               *differences.notes],
        tolerances={"rtol": tol.rtol, "atol": tol.atol, "eps": differences.fd.eps},
        upstream_source="ones" if bound.grad is None else "--grad", full=options.full,
        constants={n: {"shape": list(c.tensor.shape),
                       "dtype": str(c.tensor.dtype).removeprefix("torch."),
                       "origin": c.origin} for n, c in bound.constants.items()})


def _nonfinite(backward: engines.Backward) -> list[str]:
    """Where the function or autograd is NaN/inf at the given inputs themselves."""
    found = [] if all_finite(backward.engine.output.detach()) else ["output"]
    for name, grad in (backward.grads or {}).items():
        if not all_finite(grad):
            found.append(name)
    return found


def _guessed(target: Any, options: Any) -> list[str]:
    guessed = getattr(target, "guessed", None)
    return guessed(set(options.at) | set(target.given)) if guessed else []


def _mode_note(target: Any, options: Any) -> list[str]:
    """--mode asked of a target without modules: said, not silently ignored."""
    base = getattr(target, "base", target)  # --order 2 wraps the target
    if options.mode is None or getattr(base, "module", None) is not None:
        return []
    return [f"--mode {options.mode} had nothing to switch: the target reaches no nn.Module"]


@contextmanager
def _timed(timings: dict[str, float], name: str):
    tic = time.perf_counter()
    yield
    timings[name] = time.perf_counter() - tic


__all__ = ["prepare", "run"]
