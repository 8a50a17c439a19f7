"""The report stage: the Report built once, from every earlier stage's values — one entry per
input with a column per engine (its worst elements when large, and the rows a table shows),
the header, the named checks, forward mode, accumulation, intermediate gradients, the
diagnostics, the notes in their order, a model's module roll-up, and the failures, to which
`--fail-on warning` adds every warning. `passed` is `not failures`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch

from gradscope import features as registry
from gradscope._version import __version__
from gradscope.compare import outcome
from gradscope.compare.elements import Comparison
from gradscope.engines.base import Answer, estimated
from gradscope.evidence.gather import Evidence, View
from gradscope.evidence.prepare import Prepared
from gradscope.features import Feature, Guard
from gradscope.report import build
from gradscope.report.model import Column, ForwardReport, InputReport, Report
from gradscope.report.modules import is_model, rollup
from gradscope.report.status import Status
from gradscope.runner import failed
from gradscope.runner.diagnoses import Diagnoses
from gradscope.runner.excuses import Excuses
from gradscope.runner.judgement import Verdict
from gradscope.tensors import max_abs, max_abs_difference


def assemble(prepared: Prepared, evidence: Evidence, excuses: Excuses, verdict: Verdict,
             diagnoses: Diagnoses) -> Report:
    options, target = prepared.options, prepared.target
    inputs = _inputs(prepared, evidence, verdict, diagnoses)
    guard = Guard(registry.FEATURES, diagnoses.aside)
    ctx = excuses.context(prepared, evidence)
    reported = registry.report_fields()  # (every feature's, its default where it says none)
    for feature in guard.active:
        reported.update(guard.call(feature, lambda f=feature: _fields(f, f.reported(ctx, inputs)),
                                   {}))
    inputs = reported.pop("inputs", inputs)  # (a feature's column added: a run mode's)
    diagnostics = list(diagnoses.diagnostics)
    failures = list(verdict.failures)
    if options.fail_on == "warning":
        failures += outcome.warnings(diagnostics, [i.status for i in inputs],
                                     verdict.forward_status)
    model = is_model(target.roles())
    limit = options.max_elements, options.full
    traced = evidence.backward.flow
    return Report(
        command=prepared.request.command, target=target.text, target_kind=target.kind,
        dtype=options.dtype, passed=not failures, version=__version__,
        output=build.summary(evidence.backward.engine.output, *limit),
        upstream=build.summary(evidence.backward.upstream, *limit), inputs=inputs,
        diagnostics=diagnostics, device=str(prepared.bound.device), seed=options.seed,
        fail_on=options.fail_on, tolerances=_tolerances(evidence),
        upstream_checks=list(verdict.checks), forward=_forward(prepared, evidence, verdict),
        accumulation=_accumulation(prepared, evidence, verdict),
        intermediates=_intermediates(traced, options) if options.intermediates and traced
        else None,
        notes=[*_notes(prepared, evidence, diagnoses), *guard.notes()],
        timings={**evidence.timings, **excuses.timings},
        upstream_source=prepared.bound.upstream.source, fields=reported,
        upstream_undefined=_undefined_upstream(prepared, evidence),
        nonfinite=list(evidence.nonfinite), allow_nan=options.allow_nan, full=options.full,
        modules=rollup(inputs) if model else [],
        forward_order=list(traced.entered) if traced is not None else [],
        constants={n: {"shape": list(c.tensor.shape),
                       "dtype": str(c.tensor.dtype).removeprefix("torch."),
                       "origin": c.origin} for n, c in prepared.bound.constants.items()},
        failures=failures, model=model, branches=_branches(traced))


def _undefined_upstream(prepared: Prepared, evidence: Evidence) -> int:
    """How many output elements the default upstream leaves out (0 where NaN or infinite)."""
    if not prepared.bound.upstream.ones:
        return 0
    upstream = evidence.backward.upstream
    return upstream.numel() - int(torch.count_nonzero(upstream))


def _fields(feature: Feature[Any], reported: dict[str, Any]) -> dict[str, Any]:
    """A feature's report fields, each one it declares, or the inputs' rows (another is the
    feature's error)."""
    unknown = sorted(set(reported) - set(feature.fields) - {"inputs"})
    if unknown:
        raise ValueError(f"feature {feature.name!r} declares no report field {unknown[0]!r}")
    return reported


def _branches(traced: Any) -> list[dict[str, Any]]:
    """The branch sites the watched forward saw, with the elements on each side."""
    if traced is None:
        return []
    return [{"where": b.where, "op": b.op, "sides": dict(b.sides), "one_sided": b.one_sided}
            for b in traced.branches]


def _tolerances(evidence: Evidence) -> dict[str, float]:
    finite = evidence.finite
    eps = finite.fd.eps if finite is not None and finite.fd is not None else 0.0
    return {"rtol": evidence.tol.rtol, "atol": evidence.tol.atol, "eps": eps}


def _notes(prepared: Prepared, evidence: Evidence, diagnoses: Diagnoses) -> list[str]:
    """In order: the request's own, the target's, what was guessed, what autograd's graph
    taught, precision, each engine's; then what the diagnoses add and the engines skipped."""
    target, options = prepared.target, prepared.options
    head = [*prepared.request.notes, *target.notes, *target.observed(),
            *target.guessed(set(options.at) | set(options.shape) | set(target.given)),
            *evidence.notes]
    head += [n for r in evidence.references for n in r.said()]
    tail = [*diagnoses.notes, *(n for r in evidence.references for n in r.closing)]
    return head + tail


# ------------------------------------------------------------------ per input
def _inputs(prepared: Prepared, evidence: Evidence, verdict: Verdict,
            diagnoses: Diagnoses) -> list[InputReport]:
    view = evidence.table
    if view is None:
        return failed.inputs(prepared, evidence)
    formulas = _formulas(prepared, evidence)
    out = []
    for name in prepared.target.names:
        cmp = verdict.table[name]
        if view.jacobian:
            out.append(_jacobian_input(prepared, evidence, view, name, cmp, verdict))
        else:
            out.append(_input(prepared, evidence, view, name, cmp, verdict.statuses[name],
                              formulas.get(name)))
    return out


def _formulas(prepared: Prepared, evidence: Evidence) -> dict[str, str]:
    for reference in evidence.references:
        formulas = getattr(reference, "formulas", None)
        if formulas is not None and reference.ran:
            return formulas(prepared.target.names)
    return {}


def _columns(evidence: Evidence, name: str, autograd: torch.Tensor | None,
             answers: Mapping[str, Answer], idx: torch.Tensor | None,
             shape: list[int] | None = None) -> dict[str, Column]:
    """autograd's column, then each reference's: its picked values (and error bound), or
    why it has none."""
    def shaped(t: torch.Tensor | None) -> torch.Tensor | None:
        return t.reshape(shape) if t is not None and shape is not None else t

    columns = {"autograd": Column(build.pick(shaped(autograd), idx), label=build.AUTOGRAD)}
    for reference in evidence.references:
        answer = answers.get(reference.name)
        if answer is None:
            why = reference.skipped.get(name)
            columns[reference.name] = Column(skipped=why, mode=reference.mode(name),
                                             label=reference.label,
                                             failed=why is not None and reference.answers_all)
            continue
        columns[reference.name] = Column(
            build.pick(shaped(answer.values), idx),
            build.pick(shaped(answer.error), idx) if answer.error is not None else None,
            mode=reference.mode(name), label=reference.label)
    return columns


def _input(prepared: Prepared, evidence: Evidence, view: View, name: str, cmp: Comparison,
           status: Status, formula: str | None) -> InputReport:
    options, bound = prepared.options, prepared.bound
    idx = build.worst_indices(cmp, options.max_elements, options.full)
    cast = bound.cast[name]
    ag = view.autograd[name]
    answers = view.answers[name]
    estimate = estimated(answers)
    element_status = build.statuses(cmp, idx)
    error = build.pick(cmp.error, idx)
    return InputReport(
        name=name, role=prepared.target.roles().get(name, "input"), shape=list(cast.shape),
        values=build.pick(cast, idx), columns=_columns(evidence, name, ag, answers, idx),
        formula=formula, max_abs_error=cmp.max_abs_error(), status=status,
        elements_reported="all" if idx is None else "worst",
        indices=build.indices_of(idx, tuple(cast.shape)), element_status=element_status,
        error=error, status_counts=cmp.counts(), origin=bound.values[name].origin,
        described=bound.values[name].brief,
        rows=build.rows(cmp, idx, cmp.status.numel() if idx is None else idx.numel(),
                        options.full),
        **_stats(cmp, ag, estimate.values if estimate is not None else None))


def _jacobian_input(prepared: Prepared, evidence: Evidence, view: View, name: str,
                    cmp: Comparison, verdict: Verdict) -> InputReport:
    """One input's Jacobian (out_shape + in_shape); its values are shown whole or not at all
    (the worst elements of a Jacobian are not the input's own)."""
    options, bound = prepared.options, prepared.bound
    out_shape = list(evidence.backward.engine.output.shape)
    jac_shape = out_shape + list(bound.cast[name].shape)
    shaped = cmp.reshaped(jac_shape)
    idx = build.worst_indices(shaped, options.max_elements, options.full)
    ag = view.autograd[name]
    answers = view.answers[name]
    estimate = estimated(answers)
    element_status = build.statuses(shaped, idx)
    error = build.pick(shaped.error, idx)
    return InputReport(
        name=name, role=prepared.target.roles().get(name, "input"),
        shape=list(bound.cast[name].shape),
        values=build.pick(bound.cast[name], None) if idx is None else None,
        columns=_columns(evidence, name, ag, answers, idx, jac_shape), formula=None,
        max_abs_error=shaped.max_abs_error(), status=verdict.statuses[name],
        elements_reported="all" if idx is None else "worst",
        indices=build.indices_of(idx, tuple(jac_shape)), element_status=element_status,
        error=error, status_counts=shaped.counts(), origin=bound.values[name].origin,
        described=bound.values[name].brief,
        jacobian_shape=jac_shape,
        rows=build.rows(shaped, idx, shaped.status.numel() if idx is None else idx.numel(),
                        options.full),
        **_stats(shaped, ag.reshape(jac_shape),
                 estimate.values.reshape(jac_shape) if estimate is not None else None))


def _stats(cmp: Comparison, ag: torch.Tensor, fd: torch.Tensor | None) -> dict[str, Any]:
    """One tensor in numbers, for the model summary. (A million-element input is read in a
    few passes, without copies, where every value is finite: the usual case.)"""
    counts = cmp.counts()
    total = cmp.status.numel()
    a = ag.detach().to(torch.float64)
    n = a.numel()
    stats: dict[str, Any] = {
        "checked": total - counts.get(Status.UNCHECKED, 0), "total": total,
        "grad_norm": float(torch.linalg.vector_norm(a)) if n else 0.0,
        "zero_fraction": (n - int(torch.count_nonzero(a))) / n if n else 0.0}
    top = max_abs(a)  # (finite exactly when every element is: one pass tells both)
    finite = a if math.isfinite(top) else a[torch.isfinite(a)]
    if finite.numel():  # the gradient-flow plot's bars
        stats["grad_mean_abs"] = float(torch.linalg.vector_norm(finite, 1)) / finite.numel()
        stats["grad_max_abs"] = top if finite is a else max_abs(finite)
    if fd is not None and fd.shape == a.shape and n:
        # norm-wise: max |autograd − fd| / max |fd| (element-wise ratios explode where a
        # gradient is 0 up to round-off, which says nothing); a sample's few elements are
        # picked before anything is widened to float64
        scale = max_abs(fd) if finite is a else math.nan
        if math.isfinite(scale):
            both_a, both_f = a, fd.to(torch.float64)
        else:
            both = torch.isfinite(a) & torch.isfinite(fd)
            both_a, both_f = a[both], fd[both].to(torch.float64)
            scale = max_abs(both_f)
        if both_a.numel():
            worst = max_abs_difference(both_a, both_f)
            stats["max_rel_error"] = worst / scale if scale > 0 else (0.0 if worst == 0
                                                                       else float("inf"))
    return stats


# ------------------------------------------------------------------ the rest
def _forward(prepared: Prepared, evidence: Evidence, verdict: Verdict) -> ForwardReport | None:
    fwd, cmp = evidence.forward, verdict.forward
    if fwd is None:
        return None
    options = prepared.options
    idx = build.worst_indices(cmp, options.max_elements, options.full) if cmp else None
    given = prepared.bound.tangent or {}
    columns = {"autograd": Column(build.pick(fwd.autograd, idx), skipped=fwd.autograd_skipped,
                                  label=build.AUTOGRAD)}
    for reference in evidence.references:
        answer = fwd.answers.get(reference.name)
        columns[reference.name] = Column(
            build.pick(answer.values, idx) if answer is not None else None,
            skipped=None if answer is not None else fwd.skipped.get(
                reference.name, next(iter(reference.skipped.values()), None)),
            label=reference.label, failed=reference.name in fwd.skipped)
    reference_shape = tuple(evidence.backward.engine.output.shape)
    return ForwardReport(
        tangent={n: build.plain(t) for n, t in fwd.tangents.items() if n in given},
        columns=columns, status=verdict.forward_status or Status.UNDEFINED,
        max_abs_error=cmp.max_abs_error() if cmp else float("nan"),
        element_status=build.statuses(cmp, idx) if cmp else None,
        elements_reported="all" if idx is None else "worst",
        indices=build.indices_of(idx, reference_shape))


def _accumulation(prepared: Prepared, evidence: Evidence, verdict: Verdict
                  ) -> dict[str, Any] | None:
    acc = evidence.accumulation
    if acc is None:
        return None
    n, limit = acc.repeat, prepared.options.max_elements
    return {
        "repeat": n,
        "grad": {k: build.plain(v) if v.numel() <= limit else None
                 for k, v in acc.summed.items()},
        "equals_repeat_times_vjp": bool(verdict.accumulation_ok),
        "note": (f".grad after {n} backward calls (retain_graph=True) is {n} × the VJP: "
                 "gradients accumulate; call optimizer.zero_grad() or set .grad = None "
                 "between steps"),
    }


def _intermediates(traced: Any, options: Any) -> list[dict[str, Any]]:
    """The gradient w.r.t. every intermediate (non-leaf) tensor, root first."""
    out = []
    for node in traced.walk():
        if node.leaf or node.grad is None:
            continue
        grad = node.grad
        small = options.full or grad.numel() <= options.max_elements
        out.append({"where": node.label(), "op": node.op, "node": node.name,
                    "shape": list(grad.shape),
                    "grad": build.plain(grad) if small else
                    build.plain(grad.reshape(-1)[:build.HEAD_ELEMENTS]),
                    "elements_reported": "all" if small else "head",
                    "status": node.status or "ok"})
    return out
