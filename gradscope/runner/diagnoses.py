"""The judged part of a report: the custom-backward checks and gradient flow first (they decide
which inputs are surrogate or vanishing), then the tables judged with two-point estimates and,
where a comparison doubted any, once more with them refined; then the named checks, forward
mode, accumulation and the diagnostics that explain what is not `ok`."""

from __future__ import annotations

from typing import Any

import torch

from gradscope.diagnose import custom_backward, flow, kinks, vanishing
from gradscope.inputs.bind import Bound
from gradscope.options import Options
from gradscope.report.model import Diagnostic, Report
from gradscope.runner import tables
from gradscope.runner.engines import Backward
from gradscope.targets import python as usercode
from gradscope.verdict import checks
from gradscope.verdict.judge import Judge


def failed_backward(report: Report, judge: Judge, bound: Bound, refs: tables.References,
                    backward: Backward) -> None:
    """Backward could not run: the failure, and what finite differences say instead."""
    failure = backward.failure
    assert failure is not None
    report.inputs = tables.failed_backward_inputs(judge, bound, refs, backward.upstream,
                                                  str(failure.message))
    failure.inputs = list(judge.names)
    failure.count = sum(bound.cast[n].numel() for n in judge.names)
    report.diagnostics.append(failure)


def judged(report: Report, command: str, target: Any, judge: Judge, bound: Bound,
           options: Options, refs: tables.References, backward: Backward) -> None:
    upstream, grads = backward.upstream, backward.grads
    assert grads is not None
    if isinstance(target, usercode.PythonTarget):
        report.diagnostics += custom_backward.backward_checks(target.text, judge, upstream,
                                                              backward.before, grads)
    flow_diagnostics = _flow(report, target, judge, bound, options, backward)
    undefined: dict[str, torch.Tensor] = {}
    # Judge with the two-point finite differences; when a comparison doubted any, refine
    # those to four points (with an error bound) and judge everything again, so that all
    # parts of the report rest on the same estimates.
    for attempt in range(2):
        if command == "jacobian":
            report.inputs = tables.jacobian_inputs(judge, bound, options, refs)
        else:
            report.inputs, undefined = tables.vjp_inputs(judge, bound, options, refs,
                                                         upstream, grads)
        report.upstream_checks = checks.upstream_checks(judge) if command == "check" else []
        if attempt or not judge.refine_suspects():
            break
    report.upstream_checks += checks.projections(judge, upstream, grads)
    if command == "jvp" and bound.tangent:
        report.forward = tables.forward_mode(judge, bound, options, refs.symbolic_skipped)
    if command == "jvp" and options.repeat > 1:
        report.accumulation = tables.accumulation(judge, options, upstream, grads)
    report.diagnostics += kinks.from_estimates(target.branch_sites, judge.estimates)
    report.diagnostics += flow_diagnostics
    nan = kinks.nan_diagnostic(target.text, undefined)
    if nan and not any(d.kind == "nan" for d in flow_diagnostics):
        report.diagnostics.append(nan)
    if judge.surrogates:
        counts = {i.name: i.status_counts.get("surrogate", 0) for i in report.inputs}
        report.diagnostics.append(custom_backward.surrogate(target.text, counts))


def _flow(report: Report, target: Any, judge: Judge, bound: Bound, options: Options,
          backward: Backward) -> list[Diagnostic]:
    """Gradient flow: the trace autograd's backward recorded (expressions) or one more
    forward and backward in anomaly mode (Python code, to learn file:line); none for order 2.
    Any op that blocks the gradient of an input the function really depends on is reported;
    only a known piecewise-constant op marks elements `vanishing` (a zero from an unknown op
    can be the true derivative, e.g. tanh saturated to 1.0)."""
    traced = backward.flow
    if traced is None and isinstance(target, usercode.PythonTarget):
        traced = flow.trace(usercode.sourced(target), bound.cast, backward.upstream,
                            anomaly=True, ours=usercode.OURS, keep_grads=options.intermediates)
    if traced is None:
        return []
    values = judge.fd.values if judge.fd is not None else bound.exact
    confirmed = vanishing.confirm(target.forward, values, flow.vanishing_inputs(traced),
                                  backward.upstream)
    judge.vanishing = confirmed & flow.vanishing_inputs(traced, catalogue_only=True)
    if options.intermediates:
        report.intermediates = tables.intermediates(traced, options)
    return flow.diagnostics(traced, bound.cast, confirmed)
