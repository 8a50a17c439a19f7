"""The per-input parts of a report: one table per input for the upstream (`check`, `jvp`) or
its Jacobian (`jacobian`), what finite differences say when backward failed, forward mode
(`jvp --tangent`), accumulation (`jvp --repeat`) and intermediate gradients."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from gradscope.engines.fd import Estimate
from gradscope.errors import TargetError, UsageError
from gradscope.inputs.bind import Bound, tangents_for
from gradscope.options import Options
from gradscope.report import build
from gradscope.report.model import ForwardReport, InputReport
from gradscope.report.status import INCONCLUSIVE
from gradscope.verdict.compare import Comparison, compare
from gradscope.verdict.judge import Judge

MAX_JACOBIAN_ENTRIES = 250_000  # `jacobian` refuses larger Jacobians (all inputs together)


@dataclass
class References:
    """What the tables show beside autograd: the symbolic result and why it may be missing,
    why finite differences may be missing per input, and the formulas for the titles."""

    symbolic: Mapping[str, torch.Tensor] | None
    symbolic_skipped: str | None
    fd_skipped: Mapping[str, str]
    formulas: Mapping[str, str]


def vjp_inputs(judge: Judge, bound: Bound, options: Options, refs: References,
               upstream: torch.Tensor, ag_grads: Mapping[str, torch.Tensor]
               ) -> tuple[list[InputReport], dict[str, Comparison]]:
    """One report per input for the upstream, and each input's comparison."""
    upstream64 = upstream.to(torch.float64)
    ones = bound.grad is None  # the default upstream (of --order 2 too): all ones
    inputs, cmps = [], {}
    for name in judge.names:
        est = judge.estimates[name]
        fd_grad, fd_err = est.vjp(upstream64, ones=ones) if est else (None, None)
        sym = refs.symbolic[name] if refs.symbolic else None
        cmp = cmps[name] = judge.compare(name, ag_grads[name], sym, fd_grad, fd_err)
        idx = build.worst_indices(cmp, options.max_elements, options.full)
        inputs.append(input_report(name, bound, cmp, idx, ag_grads[name], sym, fd_grad,
                                   refs.formulas.get(name), refs, est))
    return inputs, cmps


def input_report(name: str, bound: Bound, cmp: Comparison, idx: torch.Tensor | None,
                 ag: torch.Tensor, sym: torch.Tensor | None, fd: torch.Tensor | None,
                 formula: str | None, refs: References, est: Estimate | None,
                 values: bool = True) -> InputReport:
    """`idx` picks the worst elements of the compared arrays; `values`: they are the input's
    own elements (a Jacobian's are not: its values are shown whole or not at all)."""
    cast = bound.cast[name]
    return InputReport(
        name=name, role="input", shape=list(cast.shape),
        values=build.pick(cast, idx) if values else None, autograd=build.pick(ag, idx),
        symbolic=build.pick(sym, idx), finite_difference=build.pick(fd, idx),
        formula=formula, max_abs_error=cmp.max_abs_error(), status=_status(cmp),
        elements_reported="all" if idx is None else "worst",
        indices=build.indices_of(idx, tuple(cast.shape)),
        element_status=build.statuses(cmp, idx), error=build.pick(cmp.error, idx),
        status_counts=cmp.counts(), origin=bound.values[name].origin,
        symbolic_skipped=refs.symbolic_skipped if sym is None else None,
        finite_difference_skipped=refs.fd_skipped.get(name) if fd is None else None,
        finite_difference_mode=est.mode if est else None, **_stats(cmp, ag, fd))


def _stats(cmp: Comparison, ag: torch.Tensor, fd: torch.Tensor | None) -> dict[str, Any]:
    """One tensor in numbers, for the model summary."""
    counts = cmp.counts()
    total = cmp.status.numel()
    a = ag.detach().to(torch.float64)
    stats: dict[str, Any] = {
        "checked": total - counts.get("unchecked", 0), "total": total,
        "grad_norm": float(torch.linalg.vector_norm(a)) if a.numel() else 0.0,
        "zero_fraction": float((a == 0).to(torch.float64).mean()) if a.numel() else 0.0}
    if fd is not None and fd.shape == a.shape and a.numel():
        # norm-wise: max |autograd − fd| / max |fd| (element-wise ratios explode where a
        # gradient is 0 up to round-off, which says nothing)
        f = fd.to(torch.float64)
        both = torch.isfinite(a) & torch.isfinite(f)
        if bool(both.any()):
            scale = float(f[both].abs().max())
            worst = float((a[both] - f[both]).abs().max())
            stats["max_rel_error"] = worst / scale if scale > 0 else (0.0 if worst == 0
                                                                       else float("inf"))
    return stats


def _status(cmp: Comparison) -> str:
    """The input's status: its worst element's, or `inconclusive` when no element was
    compared at all (no engine covered any: a verdict that compared nothing never passes)."""
    if cmp.counts().get("unchecked") and not cmp.compared():
        return INCONCLUSIVE
    return cmp.worst()


def jacobian_inputs(judge: Judge, bound: Bound, options: Options, refs: References
                    ) -> list[InputReport]:
    """One report per input holding its Jacobian (out_shape + in_shape)."""
    n_out = judge.autograd.output.numel()
    entries = n_out * sum(bound.cast[n].numel() for n in judge.names)
    if entries > MAX_JACOBIAN_ENTRIES:
        raise UsageError(f"the Jacobian has {entries:,} entries; `jacobian` is for small "
                         f"sizes (at most {MAX_JACOBIAN_ENTRIES:,}); use `check` or `jvp`")
    ag, sym, fd = judge.jacobians()
    cmps = judge.jacobian_comparisons()
    out_shape = list(judge.autograd.output.shape)
    reports = []
    for n in judge.names:
        jac_shape = out_shape + list(bound.cast[n].shape)
        shaped = Comparison(cmps[n].status.reshape(jac_shape), cmps[n].error.reshape(jac_shape))
        idx = build.worst_indices(shaped, options.max_elements, options.full)

        def as_jac(t: torch.Tensor | None, shape: list[int] = jac_shape) -> Any:
            return t.reshape(shape) if t is not None else None

        fd_jac = fd[n][0] if fd[n] else None
        report = input_report(n, bound, shaped, idx, as_jac(ag[n]),
                              as_jac(sym[n]) if sym else None, as_jac(fd_jac), None, refs,
                              judge.estimates[n], values=idx is None)
        report.indices = build.indices_of(idx, tuple(jac_shape))
        report.jacobian_shape = jac_shape
        reports.append(report)
    return reports


def failed_backward_inputs(judge: Judge, bound: Bound, refs: References, upstream: torch.Tensor,
                           reason: str) -> list[InputReport]:
    """Backward could not run: show what finite differences say the gradient is."""
    out = []
    for name in judge.names:
        est = judge.estimates[name]
        fd_grad = est.vjp(upstream.to(torch.float64))[0] if est else None
        out.append(InputReport(
            name=name, role="input", shape=list(bound.cast[name].shape),
            values=build.plain(bound.cast[name]), autograd=None, symbolic=None,
            finite_difference=build.plain(fd_grad), formula=None,
            max_abs_error=float("nan"), status="mismatch", origin=bound.values[name].origin,
            autograd_skipped=f"backward failed: {reason}",
            symbolic_skipped=refs.symbolic_skipped,
            finite_difference_mode=est.mode if est else None,
            finite_difference_skipped=refs.fd_skipped.get(name)))
    return out


def forward_mode(judge: Judge, bound: Bound, options: Options,
                 symbolic_skipped: str | None) -> ForwardReport:
    """J·t from torch forward AD, beside the symbolic engine and finite differences."""
    autograd = judge.autograd
    tangents = tangents_for(bound.tangent, autograd.leaves, options.seed)
    try:
        ag = autograd.jvp({n: t.to(autograd.leaves[n].dtype) for n, t in tangents.items()})
        ag_skip = None
    except (UsageError, TargetError):
        raise
    except Exception as exc:  # e.g. a custom Function without forward-mode support
        ag, ag_skip = None, f"torch forward AD failed: {str(exc).splitlines()[0][:160]}"
    sym = judge.symbolic.jvp(tangents) if judge.symbolic else None
    directional = judge.fd.directional(tangents) if judge.fd else None
    reference = ag if ag is not None else directional.value
    cmp = compare(reference, sym, directional.value if directional else None,
                  directional.error if directional else None,
                  directional.kink if directional else None, judge.tol)
    idx = build.worst_indices(cmp, options.max_elements, options.full)
    given = bound.tangent or {}
    return ForwardReport(
        tangent={n: build.plain(t) for n, t in tangents.items() if n in given},
        autograd=build.pick(ag, idx), symbolic=build.pick(sym, idx),
        finite_difference=build.pick(directional.value if directional else None, idx),
        status=cmp.worst() if ag is not None else "undefined",
        max_abs_error=cmp.max_abs_error(), element_status=build.statuses(cmp, idx),
        elements_reported="all" if idx is None else "worst",
        indices=build.indices_of(idx, tuple(reference.shape)),
        symbolic_skipped=symbolic_skipped if sym is None else None, autograd_skipped=ag_skip)


def accumulation(judge: Judge, options: Options, upstream: torch.Tensor,
                 ag_grads: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """seeds/003: .grad after N backward calls with retain_graph=True is N × the VJP."""
    n = options.repeat
    summed = judge.autograd.accumulate(upstream, n)
    worst = max(float((summed[k].double() - n * ag_grads[k].double()).abs().max())
                for k in summed)
    return {
        "repeat": n,
        "grad": {k: build.plain(v) if v.numel() <= options.max_elements else None
                 for k, v in summed.items()},
        "equals_repeat_times_vjp": worst <= judge.tol.atol + judge.tol.rtol * max(
            float(v.double().abs().max()) for v in summed.values()),
        "note": (f".grad after {n} backward calls (retain_graph=True) is {n} × the VJP: "
                 "gradients accumulate; call optimizer.zero_grad() or set .grad = None "
                 "between steps"),
    }


def intermediates(traced: Any, options: Options) -> list[dict[str, Any]]:
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


def formulas(symbolic: Any, names: tuple[str, ...]) -> dict[str, str]:
    """The symbolic VJP formula per input, in terms of an upstream symbol no input uses."""
    if symbolic is None:
        return {}
    upstream = next((c for c in ("v", "v_", "upstream", "g_out") if c not in names), "v__")
    try:
        return symbolic.formulas(upstream)
    except Exception:  # a formula is a courtesy; the numbers stand without it
        return {}
