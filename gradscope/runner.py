"""One run of a command: TARGET → tensors → the three engines → comparison → Report.

Data flows one way (DESIGN.md). This module owns the order of the steps and the work limits
of the engines; `request` owns the options and the inputs, the engines own the numbers and
`assemble` owns turning tensors into report pieces.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from gradscope._version import __version__
from gradscope.diagnose import custom_backward, flow, kinks
from gradscope.engines.autograd import AutogradEngine
from gradscope.engines.fd.engine import Columns, FiniteDifferences
from gradscope.engines.symbolic import SymbolicEngine
from gradscope.errors import TargetError, UsageError
from gradscope.inputs.bind import (
    COMMANDS,
    DTYPES,
    FAIL_ON,
    Request,
    device_of,
    prepare,
    shape_text,
    upstream_for,
    validate,
    value_of,
)
from gradscope.inputs.text import Value, seed_for
from gradscope.report import build as assemble
from gradscope.report.model import ForwardReport, InputReport, Report, UpstreamCheck
from gradscope.report.status import MISMATCH, UNDEFINED
from gradscope.targets import python as usercode
from gradscope.targets.expression import ExpressionTarget, SecondOrderTarget
from gradscope.targets.python import user_error
from gradscope.verdict.compare import Comparison, compare
from gradscope.verdict.tolerance import DEFAULT_EPS, DEFAULT_TOLERANCES, Tolerance

RANDOM_UPSTREAMS = 2  # extra seeded upstream vectors behind every `check` verdict...
ONE_RANDOM_UPSTREAM_FROM = 1 << 16  # ...one for outputs this large: a single vector already
# weighs every output element independently, and a second costs a backward and compares
JACOBIAN_CHECK_ENTRIES = 4096  # `check` also compares the full Jacobian up to this size
MAX_JACOBIAN_ENTRIES = 250_000  # `jacobian` refuses larger Jacobians (all inputs together)
MAX_DENSE_WORK = 2e9  # columns × elements each evaluates × 4 points, for dense differences
# Jacobian entries finite differences keep per input (estimate and error: 2 × 8 bytes each,
# 2 GB): a full 10,000 × 10,000 Jacobian fits, as gradcheck's slow mode would need; a dense
# input whose columns would hold more is sampled
MAX_STORED_ENTRIES = 1 << 27
PROJECTIONS = 3  # random projections over every element of a sampled input
# Finite-difference columns that each need a whole evaluation are also bounded by time: about
# this many seconds for all inputs together, estimated from the base evaluation (only slow
# targets reach it)
FD_SECONDS = 30.0


@dataclass
class _Run:
    """What the engines produced, handed between the steps of one run."""

    request: Request
    target: Any
    names: tuple[str, ...]
    autograd: AutogradEngine
    symbolic: SymbolicEngine | None
    sym_skip: str | None
    fd: FiniteDifferences | None
    columns: dict[str, Columns | None]
    fd_skip: dict[str, str]
    tol: Tolerance
    sym_grads: dict[str, torch.Tensor] | None  # the symbolic engine's VJP for the upstream
    surrogates: set[str] = field(default_factory=set)
    vanishing: set[str] = field(default_factory=set)

    # two-point finite-difference estimates a comparison doubted: refined, then judged again
    suspects: dict[str, torch.Tensor] = field(default_factory=dict)
    _random: list[tuple[torch.Tensor, dict[str, torch.Tensor]]] = field(default_factory=list)
    _jacobian: tuple[Any, Any] | None = None

    def compare(self, name: str, ag: torch.Tensor, sym: torch.Tensor | None,
                fd: torch.Tensor | None, err: torch.Tensor | None,
                jacobian: bool = False) -> Comparison:
        """Compare one input's arrays: a VJP (input-shaped), or with `jacobian` its
        (out_numel, in_numel) Jacobian, whose columns carry the input's kink/sample masks."""
        col = self.columns[name]
        kink = checked = None
        if col is not None:
            kink = col.kink.reshape(1, -1) if jacobian else col.kink
            if col.sampled is not None:
                checked = col.checked.reshape(1, -1) if jacobian else col.checked
        cmp = compare(ag, sym, fd, err, kink, self.tol, checked)
        if col is not None and col.points is not None and fd is not None:
            self._doubt(name, col, cmp, jacobian)
        if name in self.surrogates and fd is not None and err is not None:
            cmp = cmp.surrogate(fd, err, self.tol)
        if name in self.vanishing and not jacobian:  # zero Jacobian entries are ordinary
            cmp = cmp.vanishing(ag)
        return cmp

    def _doubt(self, name: str, col: Columns, cmp: Comparison, jacobian: bool) -> None:
        """Remember the two-point estimates behind this comparison's mismatches."""
        if not cmp.counts().get("mismatch"):
            return
        mismatch = cmp.status == MISMATCH
        if jacobian:  # (out, in): a column is doubted when any of its entries is
            mismatch = mismatch.any(0)
        doubted = mismatch.reshape(col.points.shape).to(col.points.device) & (col.points == 2)
        if bool(doubted.any()):
            self.suspects[name] = self.suspects[name] | doubted if name in self.suspects \
                else doubted

    def refine_suspects(self) -> bool:
        """Four-point estimates for every doubted two-point one; True when any changed."""
        refined = 0
        for name, mask in self.suspects.items():
            refined += self.fd.refine(name, mask) if self.fd is not None else 0
        self.suspects = {}
        return refined > 0

    def random_upstreams(self) -> list[tuple[torch.Tensor, dict[str, torch.Tensor]]]:
        """The seeded random upstream vectors and autograd's VJP for each, computed once."""
        if not self._random:
            output = self.autograd.output
            count = RANDOM_UPSTREAMS if output.numel() < ONE_RANDOM_UPSTREAM_FROM else 1
            for k in range(count):
                gen = torch.Generator().manual_seed(seed_for(self.request.seed, f":upstream{k}"))
                # uniform(-1, 1): mixed signs and scales, never larger than the ones upstream
                # whose absolute tolerance it shares; drawn in float32 (randn in float64
                # costs seven times as much at a million elements)
                v = torch.rand(output.shape, generator=gen).to(torch.float64)
                v = v.mul_(2.0).sub_(1.0).to(output.device)
                self._random.append((v, self.autograd.vjp(v.to(output.dtype))))
        return self._random

    def jacobians(self) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor] | None]:
        """Autograd's and the symbolic engine's Jacobians, computed once (finite differences
        are read fresh: refinement may still change them)."""
        if self._jacobian is None:
            autograd, symbolic = self.autograd, self.symbolic
            sym = None
            if symbolic is not None:
                n_out = autograd.output.numel()
                basis = torch.eye(n_out, dtype=torch.float64, device=autograd.output.device)
                rows = [symbolic.vjp(b.reshape(autograd.output.shape)) for b in basis]
                sym = {n: torch.stack([r[n].reshape(-1) for r in rows]) for n in self.names}
            self._jacobian = (autograd.jacobian(), sym)
        return self._jacobian


def run(request: Request) -> Report:
    request = replace(request)  # the steps below fill in defaults; the caller's stays as given
    validate(request)
    started = time.perf_counter()
    timings: dict[str, float] = {}
    target, grad_value, values, cast = prepare(request)
    names = target.names
    python = target.kind != "expression" and request.order == 1
    dtype, device = DTYPES[request.dtype], device_of(request.device)
    exact = {n: t.to(torch.float64) for n, t in cast.items()}  # what the other engines see

    tic = time.perf_counter()
    autograd, tracer = _autograd(target, cast, request.intermediates)
    output = autograd.output
    upstream = upstream_for(grad_value, output)
    # a copy to tell whether the user's backward writes into grad_output (expressions cannot)
    before = upstream.clone() if python else upstream
    failure = None
    try:
        ag_grads = autograd.backward(upstream)
    except (UsageError, TargetError):
        raise
    except Exception as exc:  # torch's complaint about a custom backward, or the user's raise
        failure = custom_backward.classify_failure(exc, target.text)
        if failure is None:
            raise user_error(exc, "backward") from None
        ag_grads = None
    finally:
        main_flow = tracer.finish() if tracer is not None else None
    timings["autograd"] = time.perf_counter() - tic

    tic = time.perf_counter()
    symbolic, sym_skip, sym_grads = _symbolic(target, exact, upstream)
    timings["symbolic"] = time.perf_counter() - tic

    tic = time.perf_counter()
    fd, fd_note = _finite_differences(request, target, exact, dtype)
    columns: dict[str, Columns | None] = {}
    fd_skip: dict[str, str] = {}
    sampled_notes: list[str] = []
    report_notes: list[str] = []
    for name in names:
        try:
            count = _sample_size(request, fd, name)
            columns_to_do = exact[name].numel() if count is None else count
            fd.progress = request.progress(f"finite differences for {name}", columns_to_do) \
                if request.progress and not fd.is_elementwise(name) else None
            if count is None:
                columns[name] = fd.columns(name)
                if name in fd.probed and fd.is_elementwise(name):
                    report_notes.append(
                        f"finite differences: the target is elementwise in {name} (each output "
                        f"element moves with its own element of {name} only: {fd.probed[name]} "
                        "probing calls showed it), so all its elements were perturbed at once")
                continue
            columns[name] = fd.sampled(name, count, seed_for(request.seed, f":sample:{name}"))
        except (TargetError, UsageError, RuntimeError) as exc:
            # e.g. the user's forward fails at a perturbed point: the other engines still judge
            columns[name] = None
            fd_skip[name] = f"the target failed at a perturbed point: " \
                            f"{str(exc).strip().splitlines()[-1][:160]}"
            continue
        n = exact[name].numel()
        capped = f", capped at {count:,} columns: at most {MAX_STORED_ENTRIES:,} Jacobian " \
                 f"entries are kept, {MAX_DENSE_WORK:,.0f} elements evaluated, and about " \
                 f"{FD_SECONDS:.0f} s spent on all inputs (one evaluation took " \
                 f"{fd.eval_seconds:.2g} s)" \
            if count < min(request.sample, n) else ""
        sampled_notes.append(
                f"finite differences estimated {count:,} of {n:,} elements of {name} (a seeded "
                f"sample, --sample {request.sample:,}{capped}; an input past --max-fd "
                f"{request.max_fd:,} elements, or whose Jacobian columns would hold more than "
                f"{MAX_STORED_ENTRIES:,} entries, is sampled); "
                + ("the symbolic engine covers every element, "
                   if isinstance(target, ExpressionTarget) else "the others are `unchecked`, ")
                + f"and {PROJECTIONS} random projections cover all of them")
    timings["finite_difference"] = time.perf_counter() - tic

    tol = Tolerance.for_dtype(request.dtype, request.rtol, request.atol)
    state = _Run(request, target, names, autograd, symbolic, sym_skip, fd, columns, fd_skip, tol,
                 sym_grads)
    report = Report(
        command=request.command, target=target.text, target_kind=target.target_kind,
        dtype=request.dtype, passed=True, version=__version__,
        output=assemble.summary(output, request.max_elements, request.full),
        upstream=assemble.summary(upstream, request.max_elements, request.full),
        inputs=[], diagnostics=[], device=str(device), seed=request.seed,
        fail_on=request.fail_on, notes=list(target.notes),
        tolerances={"rtol": tol.rtol, "atol": tol.atol, "eps": fd.eps})
    if fd_note:
        report.notes.append(fd_note)
    report.notes += report_notes + sampled_notes

    if ag_grads is None:
        assert failure is not None
        report.inputs = _failed_backward_inputs(state, values, cast, upstream, str(failure.message))
        failure.inputs = list(names)
        failure.count = sum(cast[n].numel() for n in names)
        report.diagnostics.append(failure)
    else:
        if python:
            report.diagnostics += _custom_backward_checks(state, upstream, before, ag_grads)
        traced = main_flow or _flow(state, cast, upstream)
        flow_diagnostics = []
        if traced is not None:
            # Any op that blocks the gradient of an input the function really depends on is
            # reported; only a known piecewise-constant op marks elements `vanishing` (a zero
            # from an unknown op can be the true derivative, e.g. tanh saturated to 1.0).
            confirmed = _confirm_vanishing(state, flow.vanishing_inputs(traced), upstream)
            state.vanishing = confirmed & flow.vanishing_inputs(traced, catalogue_only=True)
            flow_diagnostics = flow.diagnostics(traced, cast, confirmed)
            if request.intermediates:
                report.intermediates = _intermediates(traced, request)
        undefined: dict[str, torch.Tensor] = {}
        # Judge with the two-point finite differences; when a comparison doubted any, refine
        # those to four points (with an error bound) and judge everything again, so that all
        # parts of the report rest on the same estimates.
        for attempt in range(2):
            if request.command == "jacobian":
                report.inputs = _jacobian_reports(state, values, cast)
            else:
                report.inputs, undefined = _vjp_inputs(state, values, cast, upstream, ag_grads)
            report.upstream_checks = _extra_checks(state, output) \
                if request.command == "check" else []
            if attempt or not state.refine_suspects():
                break
        report.upstream_checks += _projections(state, upstream, ag_grads)
        if request.command == "jvp" and request.tangent:
            report.forward = _forward(state)
        if request.command == "jvp" and request.repeat > 1:
            report.accumulation = _accumulate(state, upstream, ag_grads)
        report.diagnostics += _kink_diagnostics(state)
        report.diagnostics += flow_diagnostics
        nan = kinks.nan_diagnostic(target.text, undefined)
        if nan and not any(d.kind == "nan" for d in flow_diagnostics):
            report.diagnostics.append(nan)
        if state.surrogates:
            counts = {i.name: i.status_counts.get("surrogate", 0) for i in report.inputs}
            report.diagnostics.append(custom_backward.surrogate(target.text, counts))
    if symbolic is None and sym_skip:
        report.notes.append(f"symbolic engine skipped: {sym_skip}")
    for name, reason in fd_skip.items():
        report.notes.append(f"finite differences skipped for {name}: {reason}")
    roles = target.roles()
    for item in report.inputs:
        item.role = roles.get(item.name, "input")
    report.passed = _verdict(report)
    timings["total"] = time.perf_counter() - started
    report.timings = {k: round(v, 6) for k, v in timings.items()}
    return report


def _vjp_inputs(state: _Run, values: Mapping[str, Value], cast: Mapping[str, torch.Tensor],
                upstream: torch.Tensor, ag_grads: Mapping[str, torch.Tensor]):
    request, symbolic = state.request, state.symbolic
    upstream64 = upstream.to(torch.float64)
    sym_grads = state.sym_grads
    formulas = _formulas(symbolic, state.names)
    ones = request.grad is None  # the default upstream (of --order 2 too): all ones
    inputs, undefined = [], {}
    for name in state.names:
        col = state.columns[name]
        fd_grad, fd_err = col.vjp(upstream64, ones=ones) if col else (None, None)
        sym = sym_grads[name] if sym_grads else None
        cmp = state.compare(name, ag_grads[name], sym, fd_grad, fd_err)
        undefined[name] = cmp.status == UNDEFINED
        idx = assemble.worst_indices(cmp, request.max_elements, request.full)
        inputs.append(_input_report(name, values[name], cast[name], cmp, idx, ag_grads[name],
                                    sym, fd_grad, formulas.get(name), state.sym_skip,
                                    state.fd_skip.get(name), col))
    return inputs, undefined


def _formulas(symbolic: SymbolicEngine | None, names: tuple[str, ...]) -> dict[str, str]:
    if symbolic is None:
        return {}
    try:
        return symbolic.formulas(_upstream_symbol(names))
    except Exception:  # a formula is a courtesy; the numbers stand without it
        return {}


def _failed_backward_inputs(state: _Run, values: Mapping[str, Value],
                            cast: Mapping[str, torch.Tensor], upstream: torch.Tensor,
                            reason: str) -> list[InputReport]:
    """Backward could not run: show what finite differences say the gradient is."""
    out = []
    for name in state.names:
        col = state.columns[name]
        fd_grad = col.vjp(upstream.to(torch.float64))[0] if col else None
        item = InputReport(
            name=name, role="input", shape=list(cast[name].shape),
            values=assemble.plain(cast[name]), autograd=None, symbolic=None,
            finite_difference=assemble.plain(fd_grad), formula=None,
            max_abs_error=float("nan"), status="mismatch", origin=values[name].origin,
            autograd_skipped=f"backward failed: {reason}",
            symbolic_skipped=state.sym_skip, finite_difference_mode=col.mode if col else None,
            finite_difference_skipped=state.fd_skip.get(name))
        out.append(item)
    return out


def _custom_backward_checks(state: _Run, upstream: torch.Tensor, before: torch.Tensor,
                            ag_grads: Mapping[str, torch.Tensor]) -> list:
    """Linearity, determinism and in-place checks of a user's backward; decides which inputs
    carry a deliberate surrogate gradient."""
    text = state.target.text
    diagnostics = []
    mutated = custom_backward.inplace(before, upstream, text)
    if mutated:
        diagnostics.append(mutated)
    nondeterministic = custom_backward.determinism(state.autograd, before, ag_grads, text)
    if nondeterministic:
        diagnostics.append(nondeterministic)
    nonlinear, masks = custom_backward.linearity(state.autograd, state.tol, state.request.seed,
                                                 text)
    if nonlinear:
        diagnostics.append(nonlinear)
    for name in state.names:
        col = state.columns[name]
        if col is None or bool(masks[name].any()) or not bool((ag_grads[name] != 0).any()):
            continue
        if col.locally_constant(state.tol.atol):
            state.surrogates.add(name)
            continue
        # A two-point estimate across a jump looks like a steep slope; extrapolated, it shows
        # that it never converges (a kink). When only a few columns move, look again with
        # those refined (a smooth function moves in most of them: nothing to look for).
        moving = col.nonconstant(state.tol.atol)
        if state.fd is not None and 0 < int(moving.sum()) <= max(1, moving.numel() // 10) \
                and state.fd.refine(name, moving) and col.locally_constant(state.tol.atol):
            state.surrogates.add(name)
    return diagnostics


def _autograd(target: Any, cast: Mapping[str, torch.Tensor], keep_grads: bool
              ) -> tuple[AutogradEngine, flow.Tracer | None]:
    """The autograd engine, and for an expression the gradient-flow hooks on its graph: the
    user's `y.backward(v)` itself records the flow (the hooks only look), so no second
    forward and backward is needed."""
    if not isinstance(target, ExpressionTarget):
        return AutogradEngine(target.forward, cast), None
    seen: dict[str, Any] = {}

    def forward(values: Mapping[str, torch.Tensor]) -> torch.Tensor:
        out, seen["where"], seen["nan"] = target.sourced(values)
        return out

    engine = AutogradEngine(forward, cast, copy=False)  # torch ops never write into inputs
    engine.forward = target.forward  # later forward-mode calls need no source map
    return engine, flow.Tracer(engine.output, engine.leaves, seen["where"], seen["nan"],
                               keep_grads=keep_grads)


def _flow(state: _Run, cast: Mapping[str, torch.Tensor], upstream: torch.Tensor):
    """The gradient-flow trace of Python code (one more forward, in anomaly mode to learn
    file:line, and backward), or None for order 2."""
    target = state.target
    keep = state.request.intermediates
    if isinstance(target, usercode.PythonTarget):
        return flow.trace(usercode.sourced(target), cast, upstream, anomaly=True,
                          ours=usercode.OURS, keep_grads=keep)
    return None


WIDE_STEP = 0.37  # "the user's sense" of not constant: a shift far beyond any FD stencil


def _confirm_vanishing(state: _Run, candidates: set[str], upstream: torch.Tensor) -> set[str]:
    """Inputs below a vanishing point for which a wide shift (±0.37·max(1,|x|)) still changes
    vᵀf, the quantity whose gradient is asked for: the function is not constant in them, so
    the zero gradient is an artefact of the op (round, floor, ...). `0*x` is constant at every
    scale, and `sum(softmax(x))` is constant for a ones upstream: neither is flagged."""
    confirmed: set[str] = set()
    candidates &= set(state.names)
    if not candidates:
        return confirmed
    exact = state.fd.values  # float64, or the dtype the target could take
    v = upstream.detach().to(next(iter(exact.values())).dtype)

    def phi(values: Mapping[str, torch.Tensor]) -> float:
        return float((state.target.forward(values).detach() * v).sum())

    base = phi(exact)
    for name in candidates:
        x = exact[name]
        step = WIDE_STEP * x.abs().clamp(min=1.0)
        for sign in (1.0, -1.0):
            moved = phi({**exact, name: x + sign * step})
            if abs(moved - base) > 1e-6 * (1.0 + abs(base)):
                confirmed.add(name)
                break
    return confirmed


def _intermediates(traced: Any, request: Request) -> list[dict[str, Any]]:
    """The gradient w.r.t. every intermediate (non-leaf) tensor, root first."""
    out = []
    for node in traced.walk():
        if node.leaf or node.grad is None:
            continue
        grad = node.grad
        small = request.full or grad.numel() <= request.max_elements
        out.append({"where": node.label(), "op": node.op, "node": node.name,
                    "shape": list(grad.shape),
                    "grad": assemble.plain(grad) if small else
                    assemble.plain(grad.reshape(-1)[:assemble.HEAD_ELEMENTS]),
                    "elements_reported": "all" if small else "head",
                    "status": node.status or "ok"})
    return out


def _kink_diagnostics(state: _Run) -> list:
    cols = {n: c for n, c in state.columns.items() if c}
    masks = {n: c.kink_by_branch for n, c in cols.items()}
    unexplained = {n: c.kink & ~_any_of(c.kink_by_branch, c.kink) for n, c in cols.items()}
    return kinks.kink_diagnostics(state.target.branch_sites, masks, unexplained)


def _finite_differences(request: Request, target: Any, exact: Mapping[str, torch.Tensor],
                        dtype: torch.dtype) -> tuple[FiniteDifferences, str | None]:
    """Finite differences in float64; in the run's dtype when the target cannot take float64."""
    eps = request.eps or DEFAULT_EPS
    probe = not isinstance(target, ExpressionTarget)  # an expression declares its structure
    try:
        return FiniteDifferences(target.traced, exact, elementwise=target.elementwise_inputs,
                                 eps=eps, around=getattr(target, "traced_around", None),
                                 probe=probe), None
    except (UsageError, TargetError) as exc:
        if dtype == torch.float64:
            raise
        first = str(exc).splitlines()[-1]
        low_eps = request.eps or float(torch.finfo(dtype).eps) ** (1 / 3)
        fd = FiniteDifferences(target.traced, {n: t.to(dtype) for n, t in exact.items()},
                               elementwise=target.elementwise_inputs, eps=low_eps, dtype=dtype,
                               around=getattr(target, "traced_around", None), probe=probe)
        return fd, (f"finite differences ran in {request.dtype} (eps {low_eps:.3g}): the target "
                    f"failed in float64 ({first})")


def _accumulate(state: _Run, upstream: torch.Tensor,
                ag_grads: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """seeds/003: .grad after N backward calls with retain_graph=True is N × the VJP."""
    n = state.request.repeat
    summed = state.autograd.accumulate(upstream, n)
    worst = max(float((summed[k].double() - n * ag_grads[k].double()).abs().max())
                for k in summed)
    return {
        "repeat": n,
        "grad": {k: assemble.plain(v) if v.numel() <= state.request.max_elements else None
                 for k, v in summed.items()},
        "equals_repeat_times_vjp": worst <= state.tol.atol + state.tol.rtol * max(
            float(v.double().abs().max()) for v in summed.values()),
        "note": (f".grad after {n} backward calls (retain_graph=True) is {n} × the VJP: "
                 "gradients accumulate; call optimizer.zero_grad() or set .grad = None "
                 "between steps"),
    }


def _upstream_symbol(names: tuple[str, ...]) -> str:
    for candidate in ("v", "v_", "upstream", "g_out"):
        if candidate not in names:
            return candidate
    return "v__"


# ---------------------------------------------------------------- engines
def _symbolic(target: Any, values: Mapping[str, torch.Tensor], upstream: torch.Tensor
              ) -> tuple[SymbolicEngine | None, str | None, dict[str, torch.Tensor] | None]:
    """The symbolic engine, the reason it was skipped, and its VJP for the upstream."""
    if isinstance(target, SecondOrderTarget):
        return None, "--order 2 differentiates torch's own first-order VJP, which has no " \
                     "symbolic form (autograd is compared with finite differences)", None
    if not isinstance(target, ExpressionTarget):
        return None, "Python code has no symbolic form (autograd is compared with finite " \
                     "differences)", None
    out_shape = tuple(upstream.shape)
    try:
        engine = SymbolicEngine(target.expression, values)
        if tuple(engine.output.shape) != out_shape:
            return None, (f"the symbolic output has shape {tuple(engine.output.shape)}, torch's "
                          f"{out_shape}"), None
        # the VJP now, so that a failure shows here as a skip, not later as a crash
        return engine, None, engine.vjp(upstream.to(torch.float64))
    except UsageError:
        raise
    except Exception as exc:  # the other two engines still give a verdict
        return None, f"sympy could not handle this expression ({type(exc).__name__}: " \
                     f"{str(exc).splitlines()[0][:120] if str(exc) else ''})", None


def _sample_size(request: Request, fd: FiniteDifferences, name: str) -> int | None:
    """How many columns to sample for `name`, or None for one column per element (all at
    once when the input is elementwise)."""
    if fd.is_elementwise(name):
        return None
    n_in, n_out = fd.values[name].numel(), max(1, fd.out.numel())
    stored = n_in * n_out <= MAX_STORED_ENTRIES
    width = fd.column_width(name)
    # elements one column evaluates: incremental columns touch their widest node, others a
    # perturbed copy of the input and the whole output
    per_column = max(n_out, width) if width is not None else max(n_in, n_out)
    affordable_work = 4.0 * n_in * per_column <= MAX_DENSE_WORK
    if width is not None:  # incremental columns cost their widest node, not an evaluation
        by_time = n_in
    else:
        # an expensive target (a big matmul, a slow module) costs more than its size says:
        # its columns are also bounded by time, from what one evaluation took
        by_time = int(FD_SECONDS / len(fd.values) / (4.0 * max(fd.eval_seconds, 1e-9)))
    if n_in <= request.max_fd and affordable_work and stored and n_in <= by_time:
        return None
    affordable = int(min(MAX_DENSE_WORK // (4.0 * per_column), MAX_STORED_ENTRIES // n_out,
                         by_time))
    return max(1, min(request.sample, n_in, affordable))


def _projections(state: _Run, upstream: torch.Tensor,
                 ag_grads: Mapping[str, torch.Tensor]) -> list[UpstreamCheck]:
    """For a sampled input: vᵀJt from finite differences along random directions t over all
    its elements, against (Jᵀv)·t from autograd — an element the sample missed still shows."""
    checks = []
    v = upstream.to(torch.float64)
    for name in state.names:
        col = state.columns[name]
        if col is None or col.sampled is None or state.fd is None:
            continue
        x = state.fd.values[name]
        for k in range(PROJECTIONS):
            gen = torch.Generator().manual_seed(seed_for(state.request.seed, f":proj:{name}:{k}"))
            t = torch.randn(x.shape, generator=gen, dtype=torch.float64).to(x.device)
            d = state.fd.directional({name: t})
            g = ag_grads[name].to(torch.float64)
            fd_val = float((v * d.value).sum())
            ag_val = float((g * t).sum())
            slack = (state.tol.atol + state.tol.rtol * float((g.abs() * t.abs()).sum())
                     + 3 * float((v.abs() * d.error).sum()))
            diff = abs(fd_val - ag_val)
            kinked = bool(d.kink.any())
            surrogate = name in state.surrogates
            ok = kinked or surrogate or (diff <= slack and math.isfinite(diff))
            word = "nondifferentiable" if kinked else "surrogate" if surrogate else (
                "ok" if ok else "mismatch")
            checks.append(UpstreamCheck(
                f"random projection #{k + 1} of {name} (all {x.numel():,} elements)", ok,
                diff if math.isfinite(diff) else float("nan"), 0 if ok else 1, {name: word}))
    return checks


def _any_of(masks: Mapping[int, torch.Tensor], like: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(like)
    for m in masks.values():
        out |= m
    return out


# ---------------------------------------------------------------- report pieces
def _input_report(name: str, value: Value, cast: torch.Tensor, cmp: Comparison,
                  idx: torch.Tensor | None, ag: torch.Tensor, sym: torch.Tensor | None,
                  fd: torch.Tensor | None, formula: str | None, sym_skip: str | None,
                  fd_skip: str | None, col: Columns | None) -> InputReport:
    return InputReport(
        name=name, role="input", shape=list(cast.shape),
        values=assemble.pick(cast, idx), autograd=assemble.pick(ag, idx),
        symbolic=assemble.pick(sym, idx), finite_difference=assemble.pick(fd, idx),
        formula=formula, max_abs_error=cmp.max_abs_error(), status=cmp.worst(),
        elements_reported="all" if idx is None else "worst",
        indices=assemble.indices_of(idx, tuple(cast.shape)),
        element_status=assemble.statuses(cmp, idx), error=assemble.pick(cmp.error, idx),
        status_counts=cmp.counts(), origin=value.origin,
        symbolic_skipped=sym_skip if sym is None else None,
        finite_difference_skipped=fd_skip if fd is None else None,
        finite_difference_mode=col.mode if col else None)


def _extra_checks(state: _Run, output: torch.Tensor) -> list[UpstreamCheck]:
    """The rest of `check`'s verdict: seeded random upstreams, and the Jacobian when small."""
    checks = []
    for k, (v, ag) in enumerate(state.random_upstreams()):
        sym = state.symbolic.vjp(v) if state.symbolic else None
        cmps = {}
        for name in state.names:
            col = state.columns[name]
            # Autograd's VJP for another upstream is judged against the exact symbolic one
            # where it exists; finite differences (compared per element above) add only noise.
            fd, err = col.vjp(v) if col and sym is None else (None, None)
            cmps[name] = state.compare(name, ag[name], sym[name] if sym else None, fd, err)
        checks.append(_upstream_check(f"random upstream #{k + 1} (uniform(-1,1), seed "
                                      f"{state.request.seed})", cmps))
    entries = output.numel() * sum(state.autograd.leaves[n].numel() for n in state.names)
    if entries <= JACOBIAN_CHECK_ENTRIES:
        checks.append(_upstream_check("full Jacobian", _jacobian_comparisons(state)))
    return checks


def _upstream_check(label: str, cmps: Mapping[str, Comparison]) -> UpstreamCheck:
    mismatches = sum(int((c.status == MISMATCH).sum()) for c in cmps.values())
    worst = max((c.max_abs_error() for c in cmps.values()), default=0.0)
    return UpstreamCheck(label, mismatches == 0, worst, mismatches,
                         {n: c.worst() for n, c in cmps.items()})


def _jacobians(state: _Run):
    ag, sym = state.jacobians()
    fd = {n: c.jacobian() if c else None for n, c in state.columns.items()}
    return ag, sym, fd


def _jacobian_comparisons(state: _Run) -> dict[str, Comparison]:
    ag, sym, fd = _jacobians(state)
    out = {}
    for n in state.names:
        jac, err = fd[n] if fd[n] else (None, None)
        out[n] = state.compare(n, ag[n], sym[n] if sym else None, jac, err, jacobian=True)
    return out


def _jacobian_reports(state: _Run, values: Mapping[str, Value],
                      cast: Mapping[str, torch.Tensor]) -> list[InputReport]:
    request = state.request
    n_out = state.autograd.output.numel()
    entries = n_out * sum(cast[n].numel() for n in state.names)
    if entries > MAX_JACOBIAN_ENTRIES:
        raise UsageError(f"the Jacobian has {entries:,} entries; `jacobian` is for small "
                         f"sizes (at most {MAX_JACOBIAN_ENTRIES:,}); use `check` or `jvp`")
    ag, sym, fd = _jacobians(state)
    cmps = _jacobian_comparisons(state)
    out_shape = list(state.autograd.output.shape)
    reports = []
    for n in state.names:
        jac_shape = out_shape + list(cast[n].shape)
        cmp = cmps[n]
        shaped = Comparison(cmp.status.reshape(jac_shape), cmp.error.reshape(jac_shape))
        idx = assemble.worst_indices(shaped, request.max_elements, request.full)

        def as_jac(t, shape=jac_shape):
            return t.reshape(shape) if t is not None else None

        fd_jac = fd[n][0] if fd[n] else None
        report = _input_report(n, values[n], cast[n], shaped, idx, as_jac(ag[n]),
                               as_jac(sym[n]) if sym else None, as_jac(fd_jac), None,
                               state.sym_skip, state.fd_skip.get(n), state.columns[n])
        report.values = assemble.plain(cast[n]) if idx is None else None
        report.indices = assemble.indices_of(idx, tuple(jac_shape))
        report.jacobian_shape = jac_shape
        reports.append(report)
    return reports


def _forward(state: _Run) -> ForwardReport:
    request, autograd = state.request, state.autograd
    tangents: dict[str, torch.Tensor] = {}
    given = dict(request.tangent or {})
    for name in state.names:
        leaf = autograd.leaves[name]
        if name in given:
            value = value_of(given[name], f"--tangent {name}", request.seed, f":tangent:{name}")
            t = value.tensor
            if tuple(t.shape) != tuple(leaf.shape):
                try:
                    t = t.expand(leaf.shape).clone()
                except RuntimeError:
                    raise UsageError(f"--tangent {name} has shape {shape_text(t.shape)} but input "
                                     f"{name} has shape {shape_text(leaf.shape)}") from None
            tangents[name] = t.to(device=leaf.device)
        else:
            tangents[name] = torch.zeros(leaf.shape, dtype=torch.float64, device=leaf.device)
    try:
        ag = autograd.jvp({n: t.to(autograd.leaves[n].dtype) for n, t in tangents.items()})
        ag_skip = None
    except (UsageError, TargetError):
        raise
    except Exception as exc:  # e.g. a custom Function without forward-mode support
        ag, ag_skip = None, f"torch forward AD failed: {str(exc).splitlines()[0][:160]}"
    sym = state.symbolic.jvp(tangents) if state.symbolic else None
    directional = state.fd.directional(tangents) if state.fd else None
    reference = ag if ag is not None else directional.value
    cmp = compare(reference, sym, directional.value if directional else None,
                  directional.error if directional else None,
                  directional.kink if directional else None, state.tol)
    idx = assemble.worst_indices(cmp, request.max_elements, request.full)
    return ForwardReport(
        tangent={n: assemble.plain(t) for n, t in tangents.items() if n in given},
        autograd=assemble.pick(ag, idx), symbolic=assemble.pick(sym, idx),
        finite_difference=assemble.pick(directional.value if directional else None, idx),
        status=cmp.worst() if ag is not None else "undefined",
        max_abs_error=cmp.max_abs_error(), element_status=assemble.statuses(cmp, idx),
        elements_reported="all" if idx is None else "worst",
        indices=assemble.indices_of(idx, tuple(reference.shape)),
        symbolic_skipped=state.sym_skip if sym is None else None, autograd_skipped=ag_skip)


FAILING_KINDS = {"backward_arity", "backward_shape", "nonlinear_backward",
                 "nondeterministic_backward", "inplace_backward"}


def _verdict(report: Report) -> bool:
    failed = any(i.status == "mismatch" for i in report.inputs)
    failed |= any(d.kind in FAILING_KINDS for d in report.diagnostics)
    failed |= any(not c.passed for c in report.upstream_checks)
    failed |= report.forward is not None and report.forward.status == "mismatch"
    if report.fail_on == "warning":
        failed |= bool(report.diagnostics)
        failed |= any(i.status != "ok" for i in report.inputs)
        failed |= report.forward is not None and report.forward.status != "ok"
    return not failed


__all__ = ["COMMANDS", "DEFAULT_TOLERANCES", "DTYPES", "FAIL_ON", "Request", "prepare", "run"]
