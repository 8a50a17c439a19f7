"""The judged part of a report: the custom-backward checks and gradient flow first (they decide
which inputs are surrogate or vanishing), then the tables judged with two-point estimates and,
where a comparison doubted any, once more with them refined; then the named checks, forward
mode, accumulation and the diagnostics that explain what is not `ok`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from gradscope.diagnose import (
    custom_backward,
    findings,
    flow,
    kinks,
    relations,
    surrogates,
    vanishing,
)
from gradscope.inputs.bind import Bound
from gradscope.markers import marker_of
from gradscope.options import Options
from gradscope.report.build import mask_indices
from gradscope.report.model import Diagnostic, Report
from gradscope.report.status import MISMATCH, SURROGATE, UNDEFINED
from gradscope.runner import tables
from gradscope.runner.engines import Backward
from gradscope.targets import python as usercode
from gradscope.targets import scopes
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
    judge.declared = report.declared = declared(target, judge, options)
    if isinstance(target, usercode.PythonTarget):
        report.diagnostics += custom_backward.backward_checks(target.text, judge, upstream,
                                                              backward.before, grads,
                                                              options.nondet_tol)
    flow_diagnostics = _flow(report, target, judge, bound, options, backward)
    cmps: dict[str, Any] = {}
    # Judge with the two-point finite differences; when a comparison doubted any, refine
    # those to four points (with an error bound) and judge everything again, so that all
    # parts of the report rest on the same estimates.
    for attempt in range(2):
        if command == "jacobian":
            report.inputs = tables.jacobian_inputs(judge, bound, options, refs)
        else:
            report.inputs, cmps = tables.vjp_inputs(judge, bound, options, refs, upstream,
                                                    grads)
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
    undefined = {n: c.status == UNDEFINED for n, c in cmps.items()}
    nan = kinks.nan_diagnostic(target.text, undefined)
    if nan and not any(d.kind == "nan" for d in flow_diagnostics):
        report.diagnostics.append(nan)
    explained = explain(report, target, judge, bound, grads)
    surrogate_diagnostic(report, target, judge, bound, grads, cmps, explained)


def declared(target: Any, judge: Judge, options: Options) -> dict[str, str]:
    """The inputs whose gradient the user declared a surrogate, and why: --surrogate, a
    marker on the target itself, or a marked Function in the graph."""
    names = judge.names  # --surrogate's names were checked when the inputs were bound
    autograd = judge.autograd
    marks = surrogates.marked_inputs(autograd.output, autograd.leaves)
    return surrogates.declared(options.surrogate, names,
                               marker_of(getattr(target, "obj", None)), marks)


def explain(report: Report, target: Any, judge: Judge, bound: Bound,
            grads: Mapping[str, torch.Tensor]) -> dict[str, relations.Relation]:
    """A `mismatch_pattern` diagnostic for each mismatched input whose disagreement follows
    a simple relation (and the relation of each declared surrogate, for its diagnostic)."""
    first: dict[str, relations.Arrays] = {}
    shaped: set[str] = set()  # inputs whose arrays are input-shaped (not a Jacobian)
    for seen in judge.seen.values():
        if seen.reference is not None:
            first[seen.name] = relations.Arrays(seen.autograd, seen.reference, seen.error,
                                                seen.comparison.status)
            if not seen.jacobian:
                shaped.add(seen.name)
    sizes = relations.sizes_of(tuple(judge.autograd.output.shape),
                               {n: tuple(bound.cast[n].shape) for n in judge.names})
    found: dict[str, relations.Relation] = {}
    for name, arrays in first.items():
        rel = relations.find(name, arrays, judge.tol, sizes, first, judge.ignored(name))
        if rel is None:
            continue
        found[name] = rel
        if name in judge.declared:
            continue
        report.diagnostics.append(Diagnostic(
            kind="mismatch_pattern", op=rel.kind, where=target.text, inputs=[name],
            count=rel.covers, message=f"{name}: {rel.message}", hint=_HINTS[rel.kind],
            relation=rel.kind, factor=rel.factor, summary=rel.text,
            indices={name: mask_indices(arrays.status == MISMATCH)} if name in shaped
            else None))
    return found


_HINTS = {
    "factor": "look for a constant in backward: a division by a size, a minus sign, a 2 of a "
              "square; if the scaling is deliberate, declare it with --surrogate NAME",
    "zero": "a path to this input is cut: a .detach(), torch.no_grad(), an in-place write or "
            "a zero returned by backward",
    "transposed": "check the .t()/.transpose in backward against the forward's layout",
    "permuted": "check the permute/transpose calls in backward against the forward's",
    "swapped": "return one gradient per forward input, in the forward's order",
    "additive": "backward adds a term the forward does not have",
    "ignored": "backward should give zero where the forward discards the input (as autograd "
               "of `result[:, :n] = 0` does)",
    "subset": "compare the branch of backward these elements take with the others'",
}


def surrogate_diagnostic(report: Report, target: Any, judge: Judge, bound: Bound,
                         grads: Mapping[str, torch.Tensor], cmps: Mapping[str, Any],
                         explained: Mapping[str, relations.Relation]) -> None:
    """The `surrogate_gradient` diagnostic (what each surrogate looks like, or the relation a
    declared one follows), and a note for a declaration that was not needed."""
    # every element judged surrogate in any comparison (the random upstreams and the Jacobian
    # can show one the ones upstream hides, as a hard Gumbel-softmax's)
    counts = {n: int(m.sum()) for n, m in judge.surrogate_elements.items()}
    shapes = {}
    for name in counts:
        if counts[name] and name not in judge.declared and name in cmps:
            mask = cmps[name].status == SURROGATE
            shapes[name] = surrogates.shape_of(grads[name], bound.cast[name], mask,
                                               judge.flat(name))
    reasons = {n: r.message for n, r in explained.items()}
    if any(counts.values()):
        report.diagnostics.append(surrogates.diagnostic(target.text, counts, shapes,
                                                        judge.declared, reasons))
    for name, why in judge.declared.items():
        if not counts.get(name):
            report.notes.append(f"{name} was declared a surrogate ({why}), but its gradient "
                                "agrees with the derivative: the declaration is not needed")


def _flow(report: Report, target: Any, judge: Judge, bound: Bound, options: Options,
          backward: Backward) -> list[Diagnostic]:
    """Gradient flow: the trace autograd's backward recorded (expressions) or one more
    forward and backward in anomaly mode (Python code, to learn file:line); none for order 2.
    Any op that blocks the gradient of an input the function really depends on is reported;
    only a known piecewise-constant op marks elements `vanishing` (a zero from an unknown op
    can be the true derivative, e.g. tanh saturated to 1.0)."""
    traced = backward.flow
    if traced is None and isinstance(target, usercode.PythonTarget):
        traced = flow.trace(scopes.sourced(target), bound.cast, backward.upstream,
                            anomaly=True, ours=usercode.OURS, keep_grads=options.intermediates)
    if traced is None:
        return []
    report.forward_order = traced.entered
    values = judge.fd.values if judge.fd is not None else bound.exact
    confirmed = vanishing.confirm(target.forward, values, flow.vanishing_inputs(traced),
                                  backward.upstream)
    judge.vanishing = confirmed & flow.vanishing_inputs(traced, catalogue_only=True)
    if options.intermediates:
        report.intermediates = tables.intermediates(traced, options)
    return findings.diagnostics(traced, bound.cast, confirmed, backward.grads)
